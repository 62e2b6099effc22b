//go:build !unix

package daemon

// ServeGuardianIfAsked does nothing on this system: there is no guardian.
func ServeGuardianIfAsked() {}
