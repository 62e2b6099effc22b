package daemon

import (
	"fmt"
	"os"
	"syscall"
)

// pipe makes a pipe whose ends close on exec; the read end is
// non-blocking (in Go's poller) when pollRead is set.
func pipe(pollRead bool) (r, w *os.File, err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, fmt.Errorf("pipe: %w", err)
	}
	if pollRead {
		if err := syscall.SetNonblock(p[0], true); err != nil {
			syscall.Close(p[0])
			syscall.Close(p[1])
			return nil, nil, fmt.Errorf("pipe: %w", err)
		}
	}
	return os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1"), nil
}
