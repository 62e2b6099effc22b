package kyu_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/memory"
	"github.com/kyuhq/kyu/backend/pebble"
)

// waitTimeout bounds every wait in these tests; a healthy run takes far
// less. In a synctest bubble it is the bubble's time, which runs ahead
// whenever every goroutine waits: a wait that would never end fails at
// once rather than after 20 real seconds.
const waitTimeout = 20 * time.Second

// bubble runs f in a synctest bubble, in parallel with other tests. In
// the bubble time is fake and moves only when every goroutine of f waits,
// so timeouts, leases, grace periods and intervals pass at once and on
// exact times; synctest.Wait tells when every goroutine has done what it
// can. The store, client and worker must be built inside f, and every
// goroutine f starts must have ended by the end of f's cleanups.
func bubble(t *testing.T, f func(t *testing.T)) {
	t.Parallel()
	synctest.Test(t, f)
}

// changes tells waiters that something changed: the channel next returns
// is closed at the next announce. The zero value is ready to use.
type changes struct {
	mu sync.Mutex
	c  chan struct{}
}

// next returns a channel closed at the next announce.
func (ch *changes) next() <-chan struct{} {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.c == nil {
		ch.c = make(chan struct{})
	}
	return ch.c
}

// announce wakes every waiter.
func (ch *changes) announce() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.c != nil {
		close(ch.c)
		ch.c = nil
	}
}

// waitFor waits until cond holds: it checks cond now and again at each
// announce, and fails the test at waitTimeout. cond must look only at
// what is announced.
func (ch *changes) waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		changed := ch.next()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			tb.Fatalf("timed out waiting for %s", what)
		}
	}
}

// store is the in-memory store the worker tests run on: nothing persists,
// and it signals its own wake-ups (Subscribe, WatchFinished). It also
// announces each change the worker makes to it, so a test waits for a
// job's state, a report or a registry entry on that signal (s.waitFor)
// instead of polling. What s.waitFor checks may look only at the store:
// the worker's own counters (Worker.Stats) change after the store call
// that records an outcome has returned, so a test reads them after
// synctest.Wait, or after Shutdown.
type store struct {
	*memory.Store
	changes
}

// newStore returns an empty in-memory store, closed at cleanup.
func newStore(tb testing.TB) *store {
	s := &store{Store: memory.New()}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// touch announces a change of the store.
func (s *store) touch() { s.announce() }

// The calls that change what a test waits for: jobs, their reports, the
// registry. Each announces the change once the store has made it.

func (s *store) Enqueue(ctx context.Context, p backend.EnqueueParams) (backend.EnqueueResult, error) {
	defer s.touch()
	return s.Store.Enqueue(ctx, p)
}

func (s *store) Claim(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	defer s.touch()
	return s.Store.Claim(ctx, p)
}

func (s *store) Complete(ctx context.Context, p backend.CompleteParams) (backend.BatchResult, error) {
	defer s.touch()
	return s.Store.Complete(ctx, p)
}

func (s *store) Fail(ctx context.Context, p backend.FailParams) (backend.BatchResult, error) {
	defer s.touch()
	return s.Store.Fail(ctx, p)
}

func (s *store) Release(ctx context.Context, p backend.ReleaseParams) (backend.BatchResult, error) {
	defer s.touch()
	return s.Store.Release(ctx, p)
}

func (s *store) Report(ctx context.Context, p backend.ReportParams) (backend.BatchResult, error) {
	defer s.touch()
	return s.Store.Report(ctx, p)
}

func (s *store) Promote(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	defer s.touch()
	return s.Store.Promote(ctx, p)
}

func (s *store) RecoverLeases(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	defer s.touch()
	return s.Store.RecoverLeases(ctx, p)
}

func (s *store) RegisterWorker(ctx context.Context, p backend.RegisterWorkerParams) (backend.RegisterWorkerResult, error) {
	defer s.touch()
	return s.Store.RegisterWorker(ctx, p)
}

func (s *store) CommandWorker(ctx context.Context, p backend.CommandWorkerParams) (backend.WorkerInfo, error) {
	defer s.touch()
	return s.Store.CommandWorker(ctx, p)
}

func (s *store) DeregisterWorker(ctx context.Context, p backend.DeregisterWorkerParams) error {
	defer s.touch()
	return s.Store.DeregisterWorker(ctx, p)
}

// waitState waits until the job is in state and returns it. A final state
// is waited for with Client.Wait (woken by the store's WatchFinished
// signal), which returns as soon as the job ends in any final state, so a
// job that ends otherwise fails the test at once; another state is waited
// for on the store's changes.
func waitState(tb testing.TB, s *store, c *kyu.Client, id string, state kyu.State) *kyu.Job {
	tb.Helper()
	if state.Final() {
		job := waitFinal(tb, c, id)
		if job.State != state {
			tb.Fatalf("job %s ended %s at attempt %d with errors %+v; want %s", id, job.State, job.Attempt, job.Errors, state)
		}
		return job
	}
	var job *kyu.Job
	s.waitFor(tb, "job "+id+" to be "+string(state), func() bool {
		var err error
		job, err = c.Get(context.Background(), id)
		if err != nil {
			tb.Fatalf("get %s: %v", id, err)
		}
		return job.State == state
	})
	return job
}

// waitFinal waits with Client.Wait until the job is final and returns it;
// at waitTimeout it fails the test, saying what state the job is in.
func waitFinal(tb testing.TB, c *kyu.Client, id string) *kyu.Job {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	job, err := c.Wait(ctx, id)
	if err != nil {
		j, gerr := c.Get(context.Background(), id)
		if gerr != nil {
			tb.Fatalf("%v; then Get: %v", err, gerr)
		}
		tb.Fatalf("%v; the job is %s at attempt %d with errors %+v", err, j.State, j.Attempt, j.Errors)
	}
	return job
}

// waitAllFinal waits until every job of ids is final, on the store's
// WatchFinished signal, failing the test at waitTimeout. It works on any
// store that signals (each of kyu's does).
func waitAllFinal(tb testing.TB, s backend.Backend, ids []string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sub, err := s.WatchFinished(ctx, backend.WatchParams{IDs: ids})
	if err != nil {
		tb.Fatalf("watch %d jobs: %v", len(ids), err)
	}
	defer sub.Close()
	left := ids
	for {
		var still []string
		for _, id := range left {
			j, err := s.Get(ctx, backend.GetParams{ID: id})
			if err != nil {
				tb.Fatalf("get %s: %v", id, err)
			}
			if !j.State.Final() {
				still = append(still, id)
			}
		}
		if left = still; len(left) == 0 {
			return
		}
		select {
		case <-sub.C:
		case <-ctx.Done():
			tb.Fatalf("timed out waiting for %d jobs to end; %d have not, e.g. %s", len(ids), len(left), left[0])
		}
	}
}

// newPebble opens a fresh durable store in the test's temp dir, closed at
// cleanup, for the tests that need a real one.
func newPebble(tb testing.TB) *pebble.Store {
	tb.Helper()
	s, err := pebble.Open(tb.TempDir(), pebble.Options{})
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// startWorker builds and starts a worker, shut down at cleanup.
func startWorker(tb testing.TB, s kyu.WorkerBackend, cfg kyu.WorkerConfig) *kyu.Worker {
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

// enqueueSpecs adds jobs in one call and returns their ids.
func enqueueSpecs(tb testing.TB, c *kyu.Client, jobs []kyu.JobSpec) []string {
	tb.Helper()
	res, err := c.EnqueueMany(context.Background(), jobs)
	if err != nil {
		tb.Fatalf("enqueue %d jobs: %v", len(jobs), err)
	}
	ids := make([]string, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

// recv waits for a value on ch, failing the test at waitTimeout.
func recv[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	select {
	case v := <-ch:
		return v
	case <-deadline.C:
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

// logBuffer collects log output safely across goroutines, and announces
// each line, so a test can wait for one (waitFor).
type logBuffer struct {
	changes
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	defer b.announce()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// waitLine waits until the log holds text.
func (b *logBuffer) waitLine(tb testing.TB, text string) {
	tb.Helper()
	b.waitFor(tb, "the log to say "+text, func() bool { return strings.Contains(b.String(), text) })
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
