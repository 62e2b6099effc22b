//go:build linux

package daemon_test

import (
	"bufio"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/kyuhq/kyu/daemon"
)

// startTree starts sh in a group of its own with env, which starts a
// sleep and prints its pid; it returns the pids of both.
func startTree(t *testing.T, env []string) (sh, sleep int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "sleep 300 & echo $!; wait")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	sleep, err = strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})
	return cmd.Process.Pid, sleep
}

// TestGuardian checks that when the daemon's end of the pipe closes (as
// when it dies), the guardian kills the groups it was told of, and the
// processes carrying its mark whose group it was not told of yet.
func TestGuardian(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	g, err := daemon.StartGuardian(exe, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	listedSh, listedSleep := startTree(t, os.Environ())
	g.Add(listedSh)
	markedSh, markedSleep := startTree(t, append(os.Environ(), g.Env()))
	otherSh, otherSleep := startTree(t, os.Environ())

	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "listed and marked processes killed", func() bool {
		return !alive(listedSh) && !alive(listedSleep) && !alive(markedSh) && !alive(markedSleep)
	})
	if !alive(otherSh) || !alive(otherSleep) {
		t.Error("the guardian killed a process neither listed nor marked")
	}
}
