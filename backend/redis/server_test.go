package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// privateServer is a redis-server a test started for itself.
type privateServer struct {
	t    testing.TB
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
	exit chan error
}

// needRedisServer returns the redis-server path, or ends the test as
// backendtest.Unreachable says when it is not installed.
func needRedisServer(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		unreachable(t, "redis-server (not installed)", err)
	}
	return path
}

// freePort returns a loopback port nothing listens on, whose cluster bus
// port (port+10000) is free as well.
func freePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		bus.Close()
		return port
	}
	t.Fatal("no free loopback port pair found")
	return 0
}

// startServer starts redis-server on a free port in a directory of its
// own, with args added, waits until it answers and stops it at cleanup.
func startServer(t testing.TB, args ...string) *privateServer {
	t.Helper()
	needRedisServer(t)
	ps := &privateServer{t: t, port: freePort(t), dir: t.TempDir(), args: args}
	t.Cleanup(ps.stop) // first, so a server that never answers is stopped too
	ps.start()
	return ps
}

func (ps *privateServer) addr() string { return "127.0.0.1:" + strconv.Itoa(ps.port) }

// start runs the server and waits until it answers PING.
func (ps *privateServer) start() {
	ps.t.Helper()
	var args []string
	extra := ps.args
	if len(extra) > 0 && !strings.HasPrefix(extra[0], "--") {
		// A configuration file must come first.
		args, extra = append(args, extra[0]), extra[1:]
	}
	args = append(args, "--port", strconv.Itoa(ps.port), "--bind", "127.0.0.1", "--dir", ps.dir,
		"--daemonize", "no", "--logfile", filepath.Join(ps.dir, "redis.log"))
	if !slices.Contains(extra, "--sentinel") {
		args = append(args, "--save", "")
	}
	args = append(args, extra...)
	ps.cmd = exec.Command("redis-server", args...)
	if err := ps.cmd.Start(); err != nil {
		ps.t.Fatalf("start redis-server: %v", err)
	}
	ps.exit = make(chan error, 1)
	go func(c *exec.Cmd, exit chan error) { exit <- c.Wait() }(ps.cmd, ps.exit)
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := ps.cli("PING")
		if reply := strings.TrimSpace(out); err == nil && (reply == "PONG" || strings.HasPrefix(reply, "NOAUTH")) {
			return
		}
		select {
		case err := <-ps.exit:
			ps.cmd = nil // exited: nothing left to stop
			log, _ := os.ReadFile(filepath.Join(ps.dir, "redis.log"))
			ps.t.Fatalf("redis-server on port %d exited: %v\n%s", ps.port, err, log)
		default:
		}
		if time.Now().After(deadline) {
			ps.t.Fatalf("redis-server on port %d does not answer: %v %s", ps.port, err, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill stops the server at once (SIGKILL) and waits for it to exit.
func (ps *privateServer) kill() {
	if ps.cmd == nil {
		return
	}
	ps.cmd.Process.Kill()
	<-ps.exit
	ps.cmd = nil
}

func (ps *privateServer) stop() { ps.kill() }

// cli runs redis-cli against the server.
func (ps *privateServer) cli(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "redis-cli", append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(ps.port)}, args...)...).CombinedOutput()
	if err == nil && strings.HasPrefix(string(out), "ERR") {
		err = errors.New(strings.TrimSpace(string(out)))
	}
	return string(out), err
}

// waitFor polls cond every few milliseconds until it holds or the time
// runs out, which fails the test with what.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// unreachable ends a test that cannot get its own server.
func unreachable(t testing.TB, what string, err error) {
	t.Helper()
	backendtestUnreachable(t, "redis-server", fmt.Errorf("private %s: %w", what, err))
}
