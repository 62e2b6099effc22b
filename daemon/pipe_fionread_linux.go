package daemon

import (
	"os"

	"golang.org/x/sys/unix"
)

// pipeEmpty reports whether nothing waits to be read in the pipe f (when
// that cannot be told, true).
func pipeEmpty(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return true
	}
	n := 0
	_ = rc.Control(func(fd uintptr) {
		n, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
	})
	return err != nil || n == 0
}
