//go:build unix && !linux

package daemon

// groupHasLiveProcess answers true: without /proc a zombie cannot be
// told from a live process.
func groupHasLiveProcess(int) bool { return true }
