//go:build unix

package daemon

import (
	"errors"
	"syscall"
	"time"
)

// signalGroup sends sig to the process group pgid; a group already gone
// is not an error.
func signalGroup(pgid int, sig syscall.Signal) error {
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// groupAlive reports whether any process of the group pgid is left. A
// zombie does not count where the system lets it be told apart (Linux):
// an orphan whose new parent (a PID 1 that reaps nothing) never reaps it
// would otherwise keep its group alive forever.
func groupAlive(pgid int) bool {
	if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
		return false
	}
	return groupHasLiveProcess(pgid)
}

// groupGoneWait is how long, at most, ensureGroupGone waits for a group
// sent SIGKILL to disappear: a zombie whose parent does not reap it (an
// orphan under a PID 1 that reaps nothing) would keep it forever.
const groupGoneWait = 5 * time.Second

// ensureGroupGone returns once no process of the group pgid is left: it
// sends SIGTERM to what is left, then SIGKILL after grace (at once when
// kill is closed). It reports false if the group outlived the SIGKILL by
// groupGoneWait.
func ensureGroupGone(pgid int, grace time.Duration, kill <-chan struct{}) bool {
	if !groupAlive(pgid) {
		return true
	}
	if grace > 0 {
		_ = signalGroup(pgid, syscall.SIGTERM)
		if waitGroupGone(pgid, grace, kill) {
			return true
		}
	}
	_ = signalGroup(pgid, syscall.SIGKILL)
	return waitGroupGone(pgid, groupGoneWait, nil)
}

// waitGroupGone polls the group until it is gone (true), until d has
// passed or until stop is closed (false). The polls start at 1ms and
// back off to 50ms: the processes are not this one's children, so no
// event tells their end.
func waitGroupGone(pgid int, d time.Duration, stop <-chan struct{}) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	step := time.Millisecond
	for {
		if !groupAlive(pgid) {
			return true
		}
		t := time.NewTimer(step)
		select {
		case <-t.C:
		case <-deadline.C:
			t.Stop()
			return !groupAlive(pgid)
		case <-stop:
			t.Stop()
			return !groupAlive(pgid)
		}
		step = min(2*step, 50*time.Millisecond)
	}
}
