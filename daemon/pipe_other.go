//go:build unix && !linux

package daemon

import (
	"fmt"
	"os"
)

// pipe makes a pipe whose ends close on exec (os.Pipe: both ends in Go's
// poller).
func pipe(bool) (r, w *os.File, err error) {
	r, w, err = os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("pipe: %w", err)
	}
	return r, w, nil
}
