package kyu_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

// noHeartbeats is a store whose Heartbeat always fails, as when the
// worker is cut off from it.
type noHeartbeats struct {
	backend.Backend
}

func (noHeartbeats) Heartbeat(context.Context, backend.HeartbeatParams) (backend.HeartbeatResult, error) {
	return backend.HeartbeatResult{}, errors.New("injected: heartbeat failed")
}

// A lease that is not renewed must stop its handler before it expires:
// otherwise RecoverLeases hands the job to a second handler while the
// first still runs. The first handler's late success is dropped.
func TestWorkerCancelsHandlerWhenLeaseIsNotRenewed(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		var live atomic.Int32
		causes := make(chan error, 1)
		overlap := make(chan int, 4)
		testDone := make(chan struct{})
		startWorker(t, noHeartbeats{s}, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				if live.Add(1) > 1 {
					overlap <- job.Attempt
				}
				defer live.Add(-1)
				if job.Attempt == 1 {
					select {
					case <-ctx.Done():
						causes <- context.Cause(ctx)
					case <-testDone:
					}
				}
				return nil
			}),
			Queues:              map[string]int{"default": 2},
			Lease:               time.Second,
			MaintenanceInterval: 10 * time.Millisecond,
			ShutdownGrace:       100 * time.Millisecond,
		})
		t.Cleanup(func() { close(testDone) }) // runs before the worker's Shutdown
		id := enqueue(t, c, "cut-off", nil, kyu.EnqueueOptions{})

		select {
		case cause := <-causes:
			if !errors.Is(cause, kyu.ErrLeaseLost) {
				t.Fatalf("handler context cause = %v, want ErrLeaseLost", cause)
			}
		case attempt := <-overlap:
			t.Fatalf("attempt %d started while attempt 1 still ran", attempt)
		case <-time.After(waitTimeout):
			t.Fatal("the handler of an unrenewed lease was never cancelled")
		}
		job := waitState(t, s, c, id, kyu.StateCompleted)
		if job.Attempt != 2 {
			t.Errorf("completed at attempt %d, want 2: the first attempt's outcome must be dropped", job.Attempt)
		}
		if len(job.Errors) != 1 || job.Errors[0].Kind != backend.AttemptLeaseExpired {
			t.Errorf("errors = %+v, want one lease_expired", job.Errors)
		}
		if len(overlap) > 0 {
			t.Errorf("two handlers ran the job at once")
		}
	})
}

// Heartbeats keep a lease alive while its handler runs far longer than
// the lease. The lease is long enough that a heartbeat late by a few
// hundred milliseconds (a loaded machine, the race detector) is survived:
// what is tested is that leases are extended at all.
func TestWorkerHeartbeatsExtendLease(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				select {
				case <-time.After(2500 * time.Millisecond): // the job's own work: 2.5 leases
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}),
			Lease:               time.Second,
			MaintenanceInterval: 10 * time.Millisecond, // recovers any lease let lapse
		})
		id := enqueue(t, c, "long", nil, kyu.EnqueueOptions{})
		job := waitState(t, s, c, id, kyu.StateCompleted)
		if job.Attempt != 1 || len(job.Errors) != 0 {
			t.Fatalf("completed at attempt %d with errors %+v; want attempt 1 and none", job.Attempt, job.Errors)
		}
	})
}

// A handler that ignores its context past its timeout plus the grace is
// abandoned: its attempt fails and is retried, its slot is freed, and what
// it returns at last is dropped.
func TestWorkerAbandonsHandlerPastTimeout(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		var logs logBuffer
		hang := make(chan struct{})
		unhang := sync.OnceFunc(func() { close(hang) })
		w := startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				if job.Attempt == 1 {
					<-hang // ignores its context
				}
				return nil
			}),
			Queues:  map[string]int{"default": 1}, // attempt 2 needs attempt 1's slot
			Lease:   time.Second,                  // also the grace past the timeout; long enough for a late heartbeat
			Backoff: kyu.FixedBackoff(0),
			Logger:  logs.logger(),
		})
		t.Cleanup(unhang)
		id := enqueue(t, c, "stubborn", nil, kyu.EnqueueOptions{Timeout: 50 * time.Millisecond})
		job := waitState(t, s, c, id, kyu.StateCompleted)
		if job.Attempt != 2 || len(job.Errors) != 1 {
			t.Fatalf("completed at attempt %d with errors %+v; want attempt 2 after one error", job.Attempt, job.Errors)
		}
		if e := job.Errors[0]; e.Message != kyu.AbandonedMessage || e.Kind != backend.AttemptFailed {
			t.Errorf("error = %+v, want a failed attempt %q", e, kyu.AbandonedMessage)
		}
		out := logs.String()
		if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "leaked") ||
			!strings.Contains(out, "job_id="+id) || !strings.Contains(out, "type=stubborn") {
			t.Errorf("no warning naming the leaked handler of job %s:\n%s", id, out)
		}

		unhang()
		synctest.Wait() // the handler has returned, and its outcome been dealt with
		if !strings.Contains(logs.String(), "outcome of an abandoned job dropped") {
			t.Errorf("the late outcome is not logged as dropped:\n%s", logs.String())
		}
		if st := w.Stats(); st.Succeeded != 1 || st.Failed != 1 || st.Running != 0 {
			t.Errorf("stats = %+v, want 1 succeeded, 1 failed, none running", st)
		}
	})
}

// A handler that calls runtime.Goexit (as t.FailNow does) fails its
// attempt and gives its slot back.
func TestWorkerHandlerGoexit(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				if job.Attempt == 1 {
					runtime.Goexit()
				}
				return nil
			}),
			Queues:  map[string]int{"default": 1}, // attempt 2 needs attempt 1's slot
			Backoff: kyu.FixedBackoff(0),
		})
		id := enqueue(t, c, "exits", nil, kyu.EnqueueOptions{})
		job := waitState(t, s, c, id, kyu.StateCompleted)
		if job.Attempt != 2 || len(job.Errors) != 1 {
			t.Fatalf("completed at attempt %d with errors %+v; want attempt 2 after one error", job.Attempt, job.Errors)
		}
		if e := job.Errors[0]; e.Message != "handler called runtime.Goexit" || e.Kind != backend.AttemptFailed || e.Stack == "" {
			t.Errorf("error = %+v, want a failed attempt \"handler called runtime.Goexit\" with a stack", e)
		}
	})
}

// A custom backoff that panics must not kill the process: the default
// backoff is used and the panic logged.
func TestWorkerBackoffPanics(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		clock := newFakeClock()
		c := kyu.NewClient(s, kyu.ClientConfig{Clock: clock})
		var logs logBuffer
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(context.Context, *kyu.Job) error { return errors.New("no") }),
			Backoff: func(int, error) time.Duration { panic("backoff bug") },
			Clock:   clock,
			Logger:  logs.logger(),
		})
		now := clock.Now()
		id := enqueue(t, c, "unlucky", nil, kyu.EnqueueOptions{})
		job := waitState(t, s, c, id, kyu.StateRetry)
		// The default backoff after attempt 1 is 1s ±20%.
		if d := job.RunAt.Sub(now); d < 800*time.Millisecond || d > 1200*time.Millisecond {
			t.Errorf("retry in %s, want the default 1s ±20%%", d)
		}
		if out := logs.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "backoff bug") {
			t.Errorf("the backoff's panic is not logged as an error:\n%s", out)
		}
	})
}

// A retry time past the last time a store keeps is clamped to it.
func TestWorkerClampsRetryTime(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		clock := newFakeClock()
		c := kyu.NewClient(s, kyu.ClientConfig{Clock: clock})
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(context.Context, *kyu.Job) error {
				return kyu.RetryAfter(250*365*24*time.Hour, errors.New("come back much later"))
			}),
			Clock: clock,
		})
		id := enqueue(t, c, "patient", nil, kyu.EnqueueOptions{})
		job := waitState(t, s, c, id, kyu.StateRetry)
		if want := backend.MaxTime().Add(-time.Nanosecond); !job.RunAt.Equal(want) {
			t.Errorf("run_at = %s, want %s", job.RunAt, want)
		}
	})
}

// gatedBackoff blocks the recording of a failure until released, so a
// test can hold an outcome between its handler's return and the completer.
type gatedBackoff struct {
	entered chan struct{}
	release chan struct{}
}

func (g gatedBackoff) backoff(int, error) time.Duration {
	g.entered <- struct{}{}
	<-g.release
	return time.Hour
}

// When the grace ends with no handler running but an outcome still on its
// way to the completer, Shutdown waits for it before stopping the
// completer.
func TestShutdownWaitsForReturnedOutcomes(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		var logs logBuffer
		gate := gatedBackoff{entered: make(chan struct{}, 1), release: make(chan struct{})}
		release := sync.OnceFunc(func() { close(gate.release) })
		t.Cleanup(release)
		w := startWorker(t, s, kyu.WorkerConfig{
			Handler:       kyu.HandlerFunc(func(context.Context, *kyu.Job) error { return errors.New("once") }),
			Backoff:       gate.backoff,
			ShutdownGrace: 50 * time.Millisecond,
			Logger:        logs.logger(),
		})
		id := enqueue(t, c, "late-outcome", nil, kyu.EnqueueOptions{})
		recv(t, gate.entered, "the failure to be computed")

		shutdown := make(chan error, 1)
		go func() { shutdown <- w.Shutdown(context.Background()) }()
		// Shutdown either has returned already (dropping the outcome) or waits
		// for it once the grace is over.
		logs.waitFor(t, "Shutdown to finish or wait for the outcome", func() bool {
			return len(shutdown) > 0 || strings.Contains(logs.String(), "waiting for outcomes to be recorded")
		})
		release()
		if err := recv(t, shutdown, "Shutdown"); err != nil {
			t.Fatal(err)
		}
		job, err := c.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if job.State != kyu.StateRetry || len(job.Errors) != 1 || job.Errors[0].Message != "once" {
			t.Fatalf("job is %s with errors %+v right after Shutdown; want retry after \"once\"", job.State, job.Errors)
		}
	})
}

// slowComplete is a store whose Complete waits until its context ends and
// reports why it ended.
type slowComplete struct {
	backend.Backend
	entered chan struct{}
	ended   chan error
}

func (s slowComplete) Complete(ctx context.Context, p backend.CompleteParams) (backend.BatchResult, error) {
	s.entered <- struct{}{}
	<-ctx.Done()
	s.ended <- ctx.Err()
	return backend.BatchResult{}, ctx.Err()
}

// Stopping the completer does not cancel the recording it is doing: only
// its own timeout bounds it.
func TestShutdownDoesNotCancelRecording(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		b := slowComplete{Backend: s, entered: make(chan struct{}, 8), ended: make(chan error, 8)}
		w, err := kyu.NewWorker(b, kyu.WorkerConfig{
			Handler:       kyu.HandlerFunc(func(context.Context, *kyu.Job) error { return nil }),
			ShutdownGrace: 20 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		kyu.SetShutdownTimings(w, 20*time.Millisecond, 300*time.Millisecond)
		if err := w.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		enqueue(t, c, "slow-record", nil, kyu.EnqueueOptions{})
		recv(t, b.entered, "Complete to be called")
		if err := w.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := recv(t, b.ended, "Complete to end"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the recording ended with %v, want its own timeout (DeadlineExceeded): Stop cut it short", err)
		}
	})
}

func TestClientEnqueueValidationError(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := kyu.NewClient(s, kyu.ClientConfig{})
	for _, tc := range []struct {
		field string
		opts  kyu.EnqueueOptions
	}{
		{"priority", kyu.EnqueueOptions{Priority: 500}},
		{"queue", kyu.EnqueueOptions{Queue: "no spaces"}},
		{"delay", kyu.EnqueueOptions{Delay: -time.Second}},
	} {
		_, err := c.Enqueue(t.Context(), "bad", nil, tc.opts)
		verr, ok := err.(*kyu.ValidationError)
		if !ok {
			t.Errorf("%s: Enqueue = %v (%T), want a *kyu.ValidationError as it is", tc.field, err, err)
			continue
		}
		if verr.Field != tc.field || verr.Index != 0 {
			t.Errorf("%s: error names job %d field %q", tc.field, verr.Index, verr.Field)
		}
	}
}

// TestNilBackend: NewClient and NewWorker both panic on a nil store, a
// programming error found at construction.
func TestNilBackend(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		call func()
	}{
		{"NewClient", func() { kyu.NewClient(nil, kyu.ClientConfig{}) }},
		{"NewWorker", func() { kyu.NewWorker(nil, kyu.WorkerConfig{Handler: kyu.NewMux()}) }},
	} {
		func() {
			defer func() {
				if p := recover(); p != "kyu: "+tc.name+": nil backend" {
					t.Errorf("%s(nil) panicked with %v", tc.name, p)
				}
			}()
			tc.call()
			t.Errorf("%s(nil) did not panic", tc.name)
		}()
	}
}

// Handler goroutines are reused from job to job: a queue keeps at most its
// concurrency of them once jobs that panic, call runtime.Goexit, fail or
// succeed have drained, and none is left after Shutdown.
func TestWorkerHandlerGoroutinesReused(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		w, err := kyu.NewWorker(s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				switch job.Type {
				case "panics":
					panic("boom")
				case "exits":
					runtime.Goexit()
				case "fails":
					return kyu.Permanent(errors.New("bad"))
				}
				return nil
			}),
			Queues: map[string]int{"default": 4},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		types := []string{"ok", "panics", "ok", "exits", "fails", "ok"}
		var jobs []kyu.JobSpec
		for i := range 300 {
			jobs = append(jobs, kyu.JobSpec{Type: types[i%len(types)], EnqueueOptions: kyu.EnqueueOptions{MaxAttempts: 1}})
		}
		waitAllFinal(t, s, enqueueSpecs(t, c, jobs))
		synctest.Wait()
		if st := w.Stats(); st.Succeeded != 150 || st.Failed != 150 {
			t.Fatalf("stats = %+v, want 150 succeeded and 150 failed", st)
		}
		if n := kyu.HandlerGoroutines(w); n > 4 {
			t.Errorf("%d handler goroutines once the queue drained; want at most its concurrency, 4", n)
		}
		ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		defer cancel()
		if err := w.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // every goroutine of the worker has ended or waits
		if n := kyu.HandlerGoroutines(w); n != 0 {
			t.Errorf("%d handler goroutines after Shutdown; want none", n)
		}
	})
}

// gatedComplete is a store whose Complete waits for gate to close before
// recording, and whose Claim checks that the worker never asks for more
// jobs than limit while nothing has been recorded.
type gatedComplete struct {
	backend.Backend
	gate    chan struct{}
	limit   int
	claimed *atomic.Int64
	over    *atomic.Int64 // jobs asked for beyond limit before the gate opened
	claims  *changes      // announced after each claim is counted
}

func (s gatedComplete) Claim(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	select {
	case <-s.gate:
	default:
		if n := s.claimed.Load() + int64(p.Max); n > int64(s.limit) {
			s.over.Add(n - int64(s.limit))
		}
	}
	res, err := s.Backend.Claim(ctx, p)
	s.claimed.Add(int64(len(res.Jobs)))
	s.claims.announce()
	return res, err
}

func (s gatedComplete) Complete(ctx context.Context, p backend.CompleteParams) (backend.BatchResult, error) {
	select {
	case <-s.gate:
	case <-ctx.Done():
		return backend.BatchResult{}, ctx.Err()
	}
	return s.Backend.Complete(ctx, p)
}

// While no outcome is recorded, a queue holds at most three times its
// concurrency in leases, plus the jobs it may claim ahead: its running
// handlers, twice its concurrency of returned handlers whose slots were
// freed early (slots.releaseEarly), and ClaimAhead jobs waiting for a
// handler. Once outcomes are recorded, the rest of the jobs run.
//
// Claims take one job each, so every freed slot is claimed at once and the
// worker reaches the bound. With larger claims it may stop short of it: a
// fetcher waiting to fill a batch does not claim a lone free slot while an
// outcome that holds its slot is being recorded, and here none is recorded
// until the gate opens.
func TestWorkerBoundsUnrecordedLeases(t *testing.T) {
	bubble(t, func(t *testing.T) {
		const concurrency, ahead, jobs = 4, 2, 40
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		var ids []string
		for range jobs {
			ids = append(ids, enqueue(t, c, "bounded", nil, kyu.EnqueueOptions{}))
		}
		const bound = 3*concurrency + ahead
		b := gatedComplete{Backend: s, gate: make(chan struct{}), limit: bound,
			claimed: new(atomic.Int64), over: new(atomic.Int64), claims: new(changes)}
		startWorker(t, b, kyu.WorkerConfig{
			Handler:    kyu.HandlerFunc(func(context.Context, *kyu.Job) error { return nil }),
			Queues:     map[string]int{backend.DefaultQueue: concurrency},
			ClaimBatch: 1,
			ClaimAhead: ahead,
		})
		// Cleanups run last first: the gate opens before the worker stops.
		openGate := sync.OnceFunc(func() { close(b.gate) })
		t.Cleanup(openGate)
		b.claims.waitFor(t, "the worker to lease three times its concurrency and ClaimAhead", func() bool { return b.claimed.Load() >= bound })
		if n := b.over.Load(); n > 0 {
			t.Fatalf("the worker asked for %d jobs beyond 3x its concurrency plus ClaimAhead while no outcome was recorded", n)
		}
		openGate()
		waitAllFinal(t, s, ids)
		st, err := c.Stats(context.Background(), 0)
		if err != nil || len(st.Queues) != 1 || st.Queues[0].Counts[kyu.StateCompleted] != jobs {
			t.Fatalf("stats = %+v, %v; want all %d jobs completed", st, err, jobs)
		}
	})
}
