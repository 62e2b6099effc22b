package kyu_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/pebble"
)

// waitTimeout bounds every wait in these tests; a healthy run takes far less.
const waitTimeout = 20 * time.Second

// newStore opens a fresh store in the test's temp dir, closed at cleanup.
func newStore(tb testing.TB) *pebble.Store {
	tb.Helper()
	s, err := pebble.Open(tb.TempDir(), pebble.Options{})
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// startWorker builds and starts a worker, shut down at cleanup.
func startWorker(tb testing.TB, s backend.Backend, cfg kyu.WorkerConfig) *kyu.Worker {
	tb.Helper()
	w, err := kyu.NewWorker(s, cfg)
	if err != nil {
		tb.Fatalf("NewWorker: %v", err)
	}
	if err := w.Start(context.Background()); err != nil {
		tb.Fatalf("Start: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := w.Shutdown(ctx); err != nil {
			tb.Errorf("Shutdown: %v", err)
		}
	})
	return w
}

// enqueue adds one job and returns its id.
func enqueue(tb testing.TB, c *kyu.Client, jobType string, payload []byte, opts kyu.EnqueueOptions) string {
	tb.Helper()
	res, err := c.Enqueue(context.Background(), jobType, payload, opts)
	if err != nil {
		tb.Fatalf("enqueue %s: %v", jobType, err)
	}
	return res.ID
}

// eventually polls cond until it holds, failing the test at waitTimeout.
func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitState waits until the job is in state and returns it.
func waitState(tb testing.TB, c *kyu.Client, id string, state kyu.State) *kyu.Job {
	tb.Helper()
	var job *kyu.Job
	eventually(tb, "job "+id+" to be "+string(state), func() bool {
		var err error
		job, err = c.Get(context.Background(), id)
		if err != nil {
			tb.Fatalf("get %s: %v", id, err)
		}
		return job.State == state
	})
	return job
}

// recv waits for a value on ch, failing the test at waitTimeout.
func recv[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		tb.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// fakeClock is a Clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2030, time.January, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// logBuffer collects log output safely across goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
