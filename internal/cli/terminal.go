package cli

import "os"

// isTerminal reports whether v (a command's stdin or stdout) is a
// terminal: an *os.File that answers the terminal ioctl.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && isTerminalFile(f)
}
