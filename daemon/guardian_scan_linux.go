package daemon

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// killMarked sends SIGKILL to every process whose environment holds the
// variable mark ("NAME=value"), and to its process group, read from
// /proc/*/environ (the processes of other users are out of reach anyway).
// It goes over /proc until a pass finds none, so that a process started
// by one being killed is found too.
func killMarked(mark string) {
	want := []byte(mark)
	self := os.Getpid()
	for range 10 {
		found := false
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return
		}
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self {
				continue
			}
			env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
			if err != nil || !hasVar(env, want) {
				continue
			}
			found = true
			if pgid, err := syscall.Getpgid(pid); err == nil && pgid > 1 {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if !found {
			return
		}
	}
}

// hasVar reports whether the NUL-separated environment env holds kv.
func hasVar(env, kv []byte) bool {
	for len(env) > 0 {
		i := bytes.IndexByte(env, 0)
		if i < 0 {
			i = len(env)
		}
		if bytes.Equal(env[:i], kv) {
			return true
		}
		env = env[min(i+1, len(env)):]
	}
	return false
}
