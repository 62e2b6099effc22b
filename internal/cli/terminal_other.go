//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package cli

import "os"

// isTerminalFile reports whether f is a character device: a terminal, or
// a device such as a null device taken for one.
func isTerminalFile(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
