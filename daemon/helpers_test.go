//go:build unix

package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend/pebble"
	"github.com/kyuhq/kyu/daemon"
)

// testWait bounds every wait of these tests.
const testWait = 30 * time.Second

// bundle is one test's store, client and scripts directory.
type bundle struct {
	t   *testing.T
	b   *pebble.Store
	c   *kyu.Client
	dir string
	log *syncBuffer
}

func newBundle(t *testing.T) *bundle {
	t.Helper()
	dir := t.TempDir()
	st, err := pebble.Open(filepath.Join(dir, "store"), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bd := &bundle{t: t, b: st, c: kyu.NewClient(st, kyu.ClientConfig{}), dir: dir, log: &syncBuffer{}}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", bd.log.String())
		}
	})
	return bd
}

// script writes an executable shell script and returns its path.
func (bd *bundle) script(name, body string) string {
	bd.t.Helper()
	p := filepath.Join(bd.dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		bd.t.Fatal(err)
	}
	return p
}

// running is a daemon run by a test.
type running struct {
	d    *daemon.Daemon
	done chan error
}

// start runs a daemon with cfg (its logger and a short poll set unless
// given) until the test ends.
func (bd *bundle) start(cfg daemon.Config) *running {
	bd.t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(bd.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	d, err := daemon.New(bd.b, cfg)
	if err != nil {
		bd.t.Fatal(err)
	}
	r := &running{d: d, done: make(chan error, 1)}
	go func() { r.done <- d.Run(context.Background()) }()
	bd.t.Cleanup(func() {
		d.StopNow()
		select {
		case <-r.done:
		case <-time.After(testWait):
			bd.t.Error("daemon did not stop")
		}
	})
	return r
}

// wait waits for Run to return, and fails on its error.
func (r *running) wait(t *testing.T) {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(testWait):
		t.Fatal("daemon still running")
	}
}

func (bd *bundle) enqueue(jobType, payload string, opts kyu.EnqueueOptions) string {
	bd.t.Helper()
	res, err := bd.c.Enqueue(bd.t.Context(), jobType, []byte(payload), opts)
	if err != nil {
		bd.t.Fatal(err)
	}
	return res.ID
}

// waitJob polls the job until cond holds.
func (bd *bundle) waitJob(id, what string, cond func(*kyu.Job) bool) *kyu.Job {
	bd.t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		j, err := bd.c.Get(bd.t.Context(), id)
		if err != nil {
			bd.t.Fatal(err)
		}
		if cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			bd.t.Fatalf("job %s: %s: not within %v; state %s attempt %d errors %v", id, what, testWait, j.State, j.Attempt, j.Errors)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// eventually polls cond until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, testWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readPID waits for a file holding a pid and returns the pid.
func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	eventually(t, "pid file "+filepath.Base(path), func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// alive reports whether pid is a process that is not a zombie.
func alive(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}

// lastError is the job's last attempt error message.
func lastError(j *kyu.Job) string {
	if len(j.Errors) == 0 {
		return ""
	}
	return j.Errors[len(j.Errors)-1].Message
}

// syncBuffer is a buffer written by the daemon's logger while a test
// reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
