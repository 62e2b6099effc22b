package kyu_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

func TestWorkerProcessesJob(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		mux := kyu.NewMux()
		claimedBy := make(chan string, 1)
		mux.HandleFunc("greet", func(ctx context.Context, job *kyu.Job) error {
			claimedBy <- job.WorkerID
			var p struct{ Name string }
			if err := job.UnmarshalPayload(&p); err != nil {
				return kyu.Permanent(err)
			}
			return job.SetResultJSON(map[string]string{"greeting": "hello " + p.Name})
		})
		w := startWorker(t, s, kyu.WorkerConfig{Handler: mux})

		res, err := c.EnqueueJSON(t.Context(), "greet", map[string]string{"Name": "ada"}, kyu.EnqueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		job := waitState(t, s, c, res.ID, kyu.StateCompleted)
		if got, want := string(job.Result), `{"greeting":"hello ada"}`; got != want {
			t.Errorf("result = %s, want %s", got, want)
		}
		if job.Attempt != 1 || len(job.Errors) != 0 {
			t.Errorf("attempt %d with errors %v, want 1 attempt and none", job.Attempt, job.Errors)
		}
		// The store names the job's worker while it is active (some keep
		// the name once it is final, some do not).
		if id := recv(t, claimedBy, "the handler's job"); id != w.ID() {
			t.Errorf("worker id = %q, want %q", id, w.ID())
		}
		synctest.Wait() // the completer has counted the outcome
		if st := w.Stats(); st.Succeeded != 1 || st.Processed != 1 || st.Failed != 0 {
			t.Errorf("stats = %+v", st)
		}
	})
}

func TestWorkerRetriesThenSucceeds(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		w := startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				if job.Attempt <= 2 {
					return fmt.Errorf("flaky %d", job.Attempt)
				}
				return nil
			}),
			Backoff: kyu.FixedBackoff(0),
		})
		id := enqueue(t, c, "flaky", nil, kyu.EnqueueOptions{})
		job := waitState(t, s, c, id, kyu.StateCompleted)
		if job.Attempt != 3 {
			t.Errorf("attempt = %d, want 3", job.Attempt)
		}
		if len(job.Errors) != 2 || job.Errors[0].Message != "flaky 1" || job.Errors[1].Message != "flaky 2" {
			t.Fatalf("errors = %+v, want flaky 1 and flaky 2", job.Errors)
		}
		for _, e := range job.Errors {
			if e.Kind != backend.AttemptFailed {
				t.Errorf("error kind = %q, want %q", e.Kind, backend.AttemptFailed)
			}
		}
		synctest.Wait()
		if st := w.Stats(); st.Failed != 2 || st.Succeeded != 1 {
			t.Errorf("stats = %+v, want 2 failed and 1 succeeded", st)
		}
	})
}

func TestWorkerPermanentError(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		var calls atomic.Int32
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				calls.Add(1)
				return kyu.Permanent(errors.New("bad input"))
			}),
			Backoff: kyu.FixedBackoff(0),
		})
		id := enqueue(t, c, "doomed", nil, kyu.EnqueueOptions{MaxAttempts: 5})
		job := waitState(t, s, c, id, kyu.StateFailed)
		if job.Attempt != 1 || len(job.Errors) != 1 {
			t.Fatalf("attempt %d, errors %+v; want 1 attempt, 1 error", job.Attempt, job.Errors)
		}
		if got := job.Errors[0].Message; got != "bad input" {
			t.Errorf("message = %q, want the wrapped error's own %q", got, "bad input")
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("handler called %d times, want 1", n)
		}
	})
}

// TestWorkerFailMessageMadeText: an error message and a panic stack that
// are not valid text (invalid UTF-8, NUL) are recorded with U+FFFD in
// their place, so that every store accepts the failure instead of
// refusing it and leaving the job to run again at lease expiry.
func TestWorkerFailMessageMadeText(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				if job.Attempt == 1 {
					panic("bad \xff\x00")
				}
				return kyu.Permanent(errors.New("bad \xc3\x28 and \x00"))
			}),
			Backoff: kyu.FixedBackoff(0),
		})
		id := enqueue(t, c, "garbled", nil, kyu.EnqueueOptions{MaxAttempts: 5})
		job := waitState(t, s, c, id, kyu.StateFailed)
		if len(job.Errors) != 2 {
			t.Fatalf("errors %+v; want 2", job.Errors)
		}
		if got, want := job.Errors[1].Message, "bad \uFFFD( and \uFFFD"; got != want {
			t.Errorf("message = %q; want %q", got, want)
		}
		for _, e := range job.Errors {
			if !backend.ValidText(e.Message) || !backend.ValidText(e.Stack) {
				t.Errorf("attempt %d recorded message %q, stack %.80q: not valid text", e.Attempt, e.Message, e.Stack)
			}
		}
	})
}

// TestWorkerFailMessageCut: a handler error over the store's size limit
// for a failure message is cut to fit, so the failure is recorded (the
// store would refuse it whole and leave the job active until its lease
// expired).
func TestWorkerFailMessageCut(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		long := strings.Repeat("é", backend.MaxFailMessage) // twice the limit in bytes
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				return kyu.Permanent(errors.New(long))
			}),
		})
		id := enqueue(t, c, "verbose", nil, kyu.EnqueueOptions{})
		job := waitState(t, s, c, id, kyu.StateFailed)
		if len(job.Errors) != 1 {
			t.Fatalf("errors %d; want 1", len(job.Errors))
		}
		msg := job.Errors[0].Message
		if len(msg) > backend.MaxFailMessage || !strings.HasPrefix(long, strings.TrimSuffix(msg, "…")) || !backend.ValidText(msg) {
			t.Errorf("recorded a message of %d bytes (%.20q…); want the error cut to at most %d bytes", len(msg), msg, backend.MaxFailMessage)
		}
	})
}

func TestWorkerRetryAfter(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		clock := newFakeClock()
		c := kyu.NewClient(s, kyu.ClientConfig{Clock: clock})
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				return kyu.RetryAfter(90*time.Minute, errors.New("rate limited"))
			}),
			Clock: clock,
		})
		now := clock.Now()
		id := enqueue(t, c, "limited", nil, kyu.EnqueueOptions{})
		job := waitState(t, s, c, id, kyu.StateRetry)
		if want := now.Add(90 * time.Minute); !job.RunAt.Equal(want) {
			t.Errorf("run_at = %s, want %s", job.RunAt, want)
		}
		if len(job.Errors) != 1 || job.Errors[0].Message != "rate limited" {
			t.Errorf("errors = %+v, want one with the wrapped error's own message", job.Errors)
		}
	})
}

func TestWorkerBackoffByType(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		clock := newFakeClock()
		c := kyu.NewClient(s, kyu.ClientConfig{Clock: clock})
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				return errors.New("no")
			}),
			Clock:         clock,
			Backoff:       kyu.FixedBackoff(time.Hour),
			BackoffByType: map[string]kyu.BackoffFunc{"special": kyu.FixedBackoff(time.Minute)},
		})
		now := clock.Now()
		plain := enqueue(t, c, "plain", nil, kyu.EnqueueOptions{})
		special := enqueue(t, c, "special", nil, kyu.EnqueueOptions{})
		if job := waitState(t, s, c, plain, kyu.StateRetry); !job.RunAt.Equal(now.Add(time.Hour)) {
			t.Errorf("plain run_at = %s, want now+1h", job.RunAt)
		}
		if job := waitState(t, s, c, special, kyu.StateRetry); !job.RunAt.Equal(now.Add(time.Minute)) {
			t.Errorf("special run_at = %s, want now+1m", job.RunAt)
		}
	})
}

func panickingHandler(ctx context.Context, job *kyu.Job) error {
	var m map[string]int
	//lint:ignore SA5000 the handler panics on purpose, with a runtime error
	m["boom"]++ // assignment to entry in nil map
	return nil
}

func TestWorkerPanicRecovered(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		w := startWorker(t, s, kyu.WorkerConfig{Handler: kyu.HandlerFunc(panickingHandler)})
		id := enqueue(t, c, "panics", nil, kyu.EnqueueOptions{MaxAttempts: 1})
		job := waitState(t, s, c, id, kyu.StateFailed)
		if len(job.Errors) != 1 {
			t.Fatalf("errors = %+v, want 1", job.Errors)
		}
		e := job.Errors[0]
		if !strings.Contains(e.Message, "panic") || !strings.Contains(e.Message, "nil map") {
			t.Errorf("message = %q", e.Message)
		}
		if !strings.Contains(e.Stack, "panickingHandler") {
			t.Errorf("stack does not name panickingHandler:\n%s", e.Stack)
		}
		synctest.Wait()
		if st := w.Stats(); st.Failed != 1 {
			t.Errorf("stats = %+v, want 1 failed", st)
		}
	})
}

func TestWorkerUnknownType(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		mux := kyu.NewMux()
		mux.HandleFunc("known", func(context.Context, *kyu.Job) error { return nil })
		w := startWorker(t, s, kyu.WorkerConfig{Handler: mux})
		id := enqueue(t, c, "mystery", nil, kyu.EnqueueOptions{})
		job := waitState(t, s, c, id, kyu.StateRetry)
		if len(job.Errors) != 1 || job.Errors[0].Message != "no handler for type mystery" {
			t.Fatalf("errors = %+v, want one \"no handler for type mystery\"", job.Errors)
		}
		if !job.RunAt.After(job.Errors[0].At) {
			t.Errorf("retry at %s is not after the failure at %s", job.RunAt, job.Errors[0].At)
		}
		synctest.Wait()
		if st := w.Stats(); st.UnknownType != 1 || st.Failed != 1 {
			t.Errorf("stats = %+v, want 1 failed, of an unknown type", st)
		}
	})
}

func TestWorkerTimeout(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		ctxErr := make(chan error, 1)
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				<-ctx.Done()
				ctxErr <- ctx.Err()
				return ctx.Err()
			}),
			Backoff: kyu.FixedBackoff(time.Hour),
		})
		start := time.Now()
		id := enqueue(t, c, "slow", nil, kyu.EnqueueOptions{Timeout: 50 * time.Millisecond})
		if err := recv(t, ctxErr, "handler context to end"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("ctx.Err() = %v, want DeadlineExceeded", err)
		}
		if took := time.Since(start); took < 50*time.Millisecond {
			t.Errorf("context ended after %s, before the 50ms timeout", took)
		}
		job := waitState(t, s, c, id, kyu.StateRetry)
		if len(job.Errors) != 1 || !strings.Contains(job.Errors[0].Message, "deadline exceeded") {
			t.Errorf("errors = %+v", job.Errors)
		}
	})
}

// The handler's context ends at the job's timeout as a context.WithTimeout
// would: Deadline reported, Err and Cause DeadlineExceeded, in the
// handler's context and in contexts derived from it.
func TestWorkerTimeoutContext(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		type seen struct {
			deadline             time.Time
			hasDeadline          bool
			err, cause, childErr error
			childCause           error
		}
		got := make(chan seen, 1)
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				child, cancel := context.WithCancel(ctx)
				defer cancel()
				var v seen
				v.deadline, v.hasDeadline = ctx.Deadline()
				<-child.Done()
				<-ctx.Done()
				v.err, v.cause = ctx.Err(), context.Cause(ctx)
				v.childErr, v.childCause = child.Err(), context.Cause(child)
				got <- v
				return ctx.Err()
			}),
			Backoff: kyu.FixedBackoff(time.Hour),
		})
		start := time.Now()
		enqueue(t, c, "slow", nil, kyu.EnqueueOptions{Timeout: 50 * time.Millisecond})
		v := recv(t, got, "handler context to end")
		if !v.hasDeadline || v.deadline.Before(start.Add(50*time.Millisecond)) || v.deadline.After(time.Now()) {
			t.Errorf("Deadline() = %v, %v; want about %v", v.deadline, v.hasDeadline, start.Add(50*time.Millisecond))
		}
		for name, err := range map[string]error{"Err": v.err, "Cause": v.cause, "child Err": v.childErr, "child Cause": v.childCause} {
			if err != context.DeadlineExceeded {
				t.Errorf("%s = %v, want context.DeadlineExceeded", name, err)
			}
		}
	})
}

// The deadline a handler's context reports is right on the wall clock
// too after the wall clock has been stepped (by NTP, say) since the worker
// started: a handler that sends it on as a time, or compares it with a
// wall-clock reading, sees the time left, not that off by the step.
func TestWorkerDeadlineAfterWallClockStep(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		const step, timeout = time.Hour, time.Minute
		left := make(chan time.Duration, 1)
		w, err := kyu.NewWorker(s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				d, _ := ctx.Deadline()
				// The stepped wall clock, as the handler would read it.
				left <- d.Sub(time.Now().Round(0).Add(step))
				return nil
			}),
		})
		if err != nil {
			t.Fatalf("NewWorker: %v", err)
		}
		kyu.StepWallClock(w, step)
		if err := w.Start(context.Background()); err != nil {
			t.Fatalf("Start: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			if err := w.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
		enqueue(t, c, "stepped", nil, kyu.EnqueueOptions{Timeout: timeout})
		if got := recv(t, left, "handler to read its deadline"); got <= 0 || got > timeout {
			t.Errorf("deadline is %s from the wall clock's present, want at most %s and more than none", got, timeout)
		}
	})
}

func TestWorkerLeaseLost(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		clock := newFakeClock()
		c := kyu.NewClient(s, kyu.ClientConfig{Clock: clock})
		started := make(chan struct{}, 1)
		cancelled := make(chan error, 1)
		release := make(chan struct{})
		var logs logBuffer
		w := startWorker(t, s, kyu.WorkerConfig{
			Logger: logs.logger(),
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				started <- struct{}{}
				<-ctx.Done()
				cancelled <- ctx.Err()
				<-release
				return nil // a late success: it must not overwrite the new state
			}),
			Queues:             map[string]int{"default": 1},
			Clock:              clock,
			Lease:              time.Minute,
			HeartbeatInterval:  10 * time.Millisecond,
			DisableMaintenance: true,
		})
		id := enqueue(t, c, "leased", nil, kyu.EnqueueOptions{})
		recv(t, started, "handler start")

		// Time jumps past the lease; the store recovers it and another worker
		// claims the job.
		now := clock.Advance(2 * time.Minute)
		if _, err := s.RecoverLeases(t.Context(), backend.MaintenanceParams{Now: now}); err != nil {
			t.Fatal(err)
		}
		claimed, err := s.Claim(t.Context(), backend.ClaimParams{
			Queues: []string{"default"}, Max: 1, Lease: time.Hour, WorkerID: "other", Now: now,
		})
		if err != nil || len(claimed.Jobs) != 1 {
			t.Fatalf("claim by another worker: %v, %d jobs", err, len(claimed.Jobs))
		}
		if err := recv(t, cancelled, "handler context cancelled"); !errors.Is(err, context.Canceled) {
			t.Fatalf("ctx.Err() = %v, want Canceled", err)
		}
		close(release)

		// Shutdown waits until the late outcome has been dealt with.
		if err := w.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		job, err := c.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if job.State != kyu.StateActive || job.WorkerID != "other" || job.Attempt != 2 {
			t.Fatalf("job is %s by %q at attempt %d; want active by \"other\" at attempt 2", job.State, job.WorkerID, job.Attempt)
		}
		if len(job.Errors) != 1 || job.Errors[0].Kind != backend.AttemptLeaseExpired {
			t.Errorf("errors = %+v, want one lease_expired", job.Errors)
		}
		if st := w.Stats(); st.Succeeded != 0 || st.Failed != 0 || st.Processed != 1 {
			t.Errorf("stats = %+v, want 1 processed, none recorded", st)
		}
		// The late success reached the store, which refused the stale lease.
		if out := logs.String(); !strings.Contains(out, "outcome refused: the job's lease was lost") || !strings.Contains(out, "lease lost; cancelling") {
			t.Errorf("log does not show the lost lease and the refused completion:\n%s", out)
		}
	})
}

func TestShutdownWaitsForJobInGrace(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		started := make(chan struct{}, 1)
		var ctxErr atomic.Value
		w := startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				started <- struct{}{}
				select {
				case <-time.After(200 * time.Millisecond): // the job's own work
					return nil
				case <-ctx.Done():
					ctxErr.Store(ctx.Err())
					return ctx.Err()
				}
			}),
			ShutdownGrace: 20 * time.Second,
		})
		id := enqueue(t, c, "long", nil, kyu.EnqueueOptions{})
		recv(t, started, "handler start")
		if err := w.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := ctxErr.Load(); err != nil {
			t.Fatalf("handler context ended inside the grace period: %v", err)
		}
		job, err := c.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if job.State != kyu.StateCompleted {
			t.Fatalf("state = %s right after Shutdown, want completed", job.State)
		}
	})
}

func TestShutdownStopsClaiming(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		w := startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(context.Context, *kyu.Job) error { return nil }),
		})
		if err := w.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		id := enqueue(t, c, "late", nil, kyu.EnqueueOptions{})
		if err := w.Start(t.Context()); !errors.Is(err, kyu.ErrWorkerStopped) {
			t.Fatalf("Start after Shutdown = %v, want ErrWorkerStopped", err)
		}
		job, err := c.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if job.State != kyu.StatePending {
			t.Fatalf("state = %s, want pending", job.State)
		}
	})
}

func TestShutdownInterruptsJobPastGrace(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		started := make(chan struct{}, 1)
		returned := make(chan error, 1)
		w := startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				started <- struct{}{}
				<-ctx.Done()
				returned <- ctx.Err()
				return ctx.Err()
			}),
			ShutdownGrace: 100 * time.Millisecond,
		})
		id := enqueue(t, c, "endless", nil, kyu.EnqueueOptions{MaxAttempts: 3})
		recv(t, started, "handler start")
		if err := w.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		job, err := c.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if job.State != kyu.StatePending || job.Attempt != 0 {
			t.Fatalf("job is %s at attempt %d right after Shutdown; want pending at attempt 0", job.State, job.Attempt)
		}
		if len(job.Errors) != 1 || job.Errors[0].Kind != backend.AttemptInterrupted {
			t.Fatalf("errors = %+v, want one interrupted", job.Errors)
		}
		if err := recv(t, returned, "handler return"); !errors.Is(err, context.Canceled) {
			t.Errorf("ctx.Err() = %v, want Canceled", err)
		}
	})
}

func TestShutdownDoesNotWaitForHungHandler(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		var logs logBuffer
		started := make(chan struct{}, 1)
		hang := make(chan struct{})
		const grace = 100 * time.Millisecond
		w := startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				started <- struct{}{}
				<-hang // ignores its context
				return nil
			}),
			ShutdownGrace: grace,
			Logger:        logs.logger(),
		})
		id := enqueue(t, c, "hung", nil, kyu.EnqueueOptions{})
		recv(t, started, "handler start")

		ctx, cancel := context.WithTimeout(t.Context(), grace+5*time.Second)
		defer cancel()
		begin := time.Now()
		if err := w.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if ctx.Err() != nil {
			t.Fatalf("Shutdown took %s with a grace of %s", time.Since(begin), grace)
		}
		job, err := c.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if job.State != kyu.StatePending {
			t.Fatalf("state = %s right after Shutdown, want pending", job.State)
		}
		out := logs.String()
		if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "did not return") || !strings.Contains(out, id) || !strings.Contains(out, "type=hung") {
			t.Errorf("no warning naming the hung job %s in the log:\n%s", id, out)
		}

		// The handler finally returns a success after the worker has stopped:
		// it is dropped, safely, and the job stays pending.
		close(hang)
		synctest.Wait() // the handler has returned, and its outcome been dealt with
		if !strings.Contains(logs.String(), "outcome of an abandoned job dropped") {
			t.Errorf("the late outcome is not logged as dropped:\n%s", logs.String())
		}
		if job, err := c.Get(t.Context(), id); err != nil || job.State != kyu.StatePending {
			t.Fatalf("after the late outcome: %v, %v", job, err)
		}
	})
}

func TestShutdownContextCutsGraceShort(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		started := make(chan struct{}, 1)
		w := startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				started <- struct{}{}
				<-ctx.Done()
				return ctx.Err()
			}),
			ShutdownGrace: time.Hour,
		})
		id := enqueue(t, c, "endless", nil, kyu.EnqueueOptions{})
		recv(t, started, "handler start")
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if err := w.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if job := waitState(t, s, c, id, kyu.StatePending); job.Attempt != 0 {
			t.Errorf("attempt = %d, want 0", job.Attempt)
		}
	})
}

func TestRunShutsDownWhenContextEnds(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		done := make(chan struct{}, 1)
		w, err := kyu.NewWorker(s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(context.Context, *kyu.Job) error {
				done <- struct{}{}
				return nil
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		runErr := make(chan error, 1)
		go func() { runErr <- w.Run(ctx) }()
		id := enqueue(t, c, "once", nil, kyu.EnqueueOptions{})
		recv(t, done, "job to run")
		waitState(t, s, c, id, kyu.StateCompleted)
		cancel()
		if err := recv(t, runErr, "Run to return"); err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
}

func TestStartShutdownConcurrent(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		w, err := kyu.NewWorker(s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(context.Context, *kyu.Job) error { return nil }),
		})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					if err := w.Start(t.Context()); err != nil && !errors.Is(err, kyu.ErrWorkerStopped) {
						t.Errorf("Start: %v", err)
					}
				}
				if err := w.Shutdown(t.Context()); err != nil {
					t.Errorf("Shutdown: %v", err)
				}
			}()
		}
		wg.Wait()
		if err := w.Shutdown(t.Context()); err != nil {
			t.Fatalf("Shutdown again: %v", err)
		}
	})
}

func TestWorkerConcurrencyPerQueue(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		limits := map[string]int{"narrow": 2, "wide": 5}
		var live, peak [2]atomic.Int32
		index := map[string]int{"narrow": 0, "wide": 1}
		w := startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				i := index[job.Queue]
				n := live[i].Add(1)
				defer live[i].Add(-1)
				for {
					p := peak[i].Load()
					if n <= p || peak[i].CompareAndSwap(p, n) {
						break
					}
				}
				time.Sleep(3 * time.Millisecond) // the job's own work
				return nil
			}),
			Queues: limits,
		})
		const perQueue = 40
		var jobs []kyu.JobSpec
		for q := range limits {
			for range perQueue {
				jobs = append(jobs, kyu.JobSpec{Type: "work", EnqueueOptions: kyu.EnqueueOptions{Queue: q}})
			}
		}
		waitAllFinal(t, s, enqueueSpecs(t, c, jobs))
		synctest.Wait()
		if st := w.Stats(); st.Succeeded != int64(len(jobs)) {
			t.Fatalf("stats = %+v, want all %d jobs succeeded", st, len(jobs))
		}
		for q, n := range limits {
			if p := peak[index[q]].Load(); p != int32(n) {
				t.Errorf("queue %s ran at most %d handlers at once, want its limit %d", q, p, n)
			}
		}
	})
}

// The maintenance loop's Promote makes a due scheduled job pending, and
// the wake-up it signals gets the job claimed: with an hour between polls,
// nothing else would claim it.
func TestWorkerPromotesScheduledJobs(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		startWorker(t, s, kyu.WorkerConfig{
			Handler:             kyu.HandlerFunc(func(context.Context, *kyu.Job) error { return nil }),
			PollInterval:        time.Hour,
			MaintenanceInterval: 10 * time.Millisecond,
		})
		res, err := c.Enqueue(t.Context(), "later", nil, kyu.EnqueueOptions{Delay: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if res.State != kyu.StateScheduled {
			t.Fatalf("state = %s, want scheduled", res.State)
		}
		waitState(t, s, c, res.ID, kyu.StateCompleted)
	})
}

func TestWorkerRecoversExpiredLeases(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		id := enqueue(t, c, "orphan", nil, kyu.EnqueueOptions{})
		// A worker that died: it claimed the job with a short lease and vanished.
		if _, err := s.Claim(t.Context(), backend.ClaimParams{
			Queues: []string{"default"}, Max: 1, Lease: 20 * time.Millisecond, WorkerID: "dead", Now: time.Now(),
		}); err != nil {
			t.Fatal(err)
		}
		startWorker(t, s, kyu.WorkerConfig{
			Handler:             kyu.HandlerFunc(func(context.Context, *kyu.Job) error { return nil }),
			PollInterval:        time.Hour, // only the maintenance loop's wake-up gets the job claimed
			MaintenanceInterval: 10 * time.Millisecond,
		})
		job := waitState(t, s, c, id, kyu.StateCompleted)
		if len(job.Errors) != 1 || job.Errors[0].Kind != backend.AttemptLeaseExpired {
			t.Errorf("errors = %+v, want one lease_expired", job.Errors)
		}
	})
}

func TestNewWorkerValidates(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	h := kyu.HandlerFunc(func(context.Context, *kyu.Job) error { return nil })
	for name, cfg := range map[string]kyu.WorkerConfig{
		"no handler":          {},
		"bad queue":           {Handler: h, Queues: map[string]int{"no spaces": 1}},
		"zero concurrency":    {Handler: h, Queues: map[string]int{"q": 0}},
		"heartbeat >= lease":  {Handler: h, Lease: time.Second, HeartbeatInterval: time.Second},
		"heartbeat > lease/2": {Handler: h, Lease: time.Second, HeartbeatInterval: 600 * time.Millisecond},
		"lease over 24h":      {Handler: h, Lease: 25 * time.Hour},
		"negative lease":      {Handler: h, Lease: -time.Second},
		"poll over 1h":        {Handler: h, PollInterval: 2 * time.Hour},
		"maintenance over 1h": {Handler: h, MaintenanceInterval: 2 * time.Hour},
		"grace over 24h":      {Handler: h, ShutdownGrace: 25 * time.Hour},
		"negative batch":      {Handler: h, ClaimBatch: -1},
		"nil type backoff":    {Handler: h, BackoffByType: map[string]kyu.BackoffFunc{"x": nil}},
	} {
		if _, err := kyu.NewWorker(s, cfg); err == nil {
			t.Errorf("%s: NewWorker accepted the config", name)
		}
	}
	if _, err := kyu.NewWorker(s, kyu.WorkerConfig{Handler: h}); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

func TestWorkerMixedOutcomes(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		w := startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				if job.Type == "bad" {
					return kyu.Permanent(errors.New("bad"))
				}
				job.SetResult([]byte(job.Title))
				return nil
			}),
			Queues: map[string]int{"default": 20},
		})
		var jobs []kyu.JobSpec
		for i := range 100 {
			typ := "good"
			if i%2 == 1 {
				typ = "bad"
			}
			jobs = append(jobs, kyu.JobSpec{Type: typ, EnqueueOptions: kyu.EnqueueOptions{Title: fmt.Sprint(i)}})
		}
		ids := enqueueSpecs(t, c, jobs)
		waitAllFinal(t, s, ids)
		synctest.Wait()
		if st := w.Stats(); st.Succeeded != 50 || st.Failed != 50 {
			t.Fatalf("stats = %+v, want 50 and 50", st)
		}
		for i, id := range ids {
			job, err := c.Get(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			want := kyu.StateCompleted
			if i%2 == 1 {
				want = kyu.StateFailed
			}
			if job.State != want || (want == kyu.StateCompleted && string(job.Result) != fmt.Sprint(i)) {
				t.Fatalf("job %d: %s with result %q, want %s", i, job.State, job.Result, want)
			}
		}
	})
}

// A drain with heartbeats much more frequent than outcomes are recorded:
// the heartbeater often snapshots leases that the completer then records,
// and must not report them lost. It runs on real time, outside a bubble:
// in a bubble no heartbeat would fire while handlers and the completer
// are busy, and the race it looks for would never happen.
func TestWorkerHeartbeatSkipsRecordedLeases(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := kyu.NewClient(s, kyu.ClientConfig{})
	const n = 2000
	jobs := make([]kyu.JobSpec, n)
	for i := range jobs {
		jobs[i] = kyu.JobSpec{Type: "noop"}
	}
	ids := enqueueSpecs(t, c, jobs)
	var logs logBuffer
	w := startWorker(t, s, kyu.WorkerConfig{
		Handler:           kyu.HandlerFunc(func(context.Context, *kyu.Job) error { return nil }),
		Queues:            map[string]int{"default": 20},
		Lease:             time.Minute,
		HeartbeatInterval: 200 * time.Microsecond,
		Logger:            logs.logger(),
	})
	waitAllFinal(t, s, ids)
	// Shutdown returns once every outcome is counted and logged.
	if err := w.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Succeeded != n {
		t.Fatalf("stats = %+v, want all %d jobs succeeded", st, n)
	}
	if strings.Contains(logs.String(), "lease lost") {
		t.Errorf("a lease was reported lost during a normal drain:\n%s", logs.String())
	}
}

func TestShutdownWithNoGrace(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		started := make(chan struct{}, 1)
		w := startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				started <- struct{}{}
				<-ctx.Done()
				return ctx.Err()
			}),
			ShutdownGrace: kyu.NoShutdownGrace,
		})
		id := enqueue(t, c, "endless", nil, kyu.EnqueueOptions{})
		recv(t, started, "handler start")
		// With no grace Shutdown must not wait for the handler: it returns far
		// sooner than the default grace of 30s would let it.
		begin := time.Now()
		if err := w.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(begin); took >= 15*time.Second {
			t.Fatalf("Shutdown with no grace took %s", took)
		}
		job, err := c.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if job.State != kyu.StatePending || job.Attempt != 0 {
			t.Fatalf("job is %s at attempt %d right after Shutdown with no grace; want pending at attempt 0", job.State, job.Attempt)
		}
	})
}

func TestSetResultJSONKeepsHTMLCharacters(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				return job.SetResultJSON(map[string]string{"html": "<b>a & b</b>"})
			}),
		})
		id := enqueue(t, c, "html", nil, kyu.EnqueueOptions{})
		job := waitState(t, s, c, id, kyu.StateCompleted)
		if got, want := string(job.Result), `{"html":"<b>a & b</b>"}`; got != want {
			t.Errorf("result = %s, want %s", got, want)
		}
	})
}

// recordedLog keeps the records a worker logs, for tests.
type recordedLog struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *recordedLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *recordedLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}
func (l *recordedLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *recordedLog) WithGroup(string) slog.Handler      { return l }

// find returns the attributes of the first record with msg, and its level.
func (l *recordedLog) find(msg string) (map[string]string, slog.Level, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.records {
		if r.Message != msg {
			continue
		}
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		return attrs, r.Level, true
	}
	return nil, 0, false
}

func TestWorkerLogsPanicAndFinalFailureAtError(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		logs := &recordedLog{}
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				if job.Type == "boom" {
					panic("boom")
				}
				return fmt.Errorf("flaky %d", job.Attempt)
			}),
			Backoff: kyu.FixedBackoff(0),
			Logger:  slog.New(logs),
		})
		panicID := enqueue(t, c, "boom", nil, kyu.EnqueueOptions{MaxAttempts: 1})
		flakyID := enqueue(t, c, "flaky", nil, kyu.EnqueueOptions{MaxAttempts: 2})
		waitState(t, s, c, panicID, kyu.StateFailed)
		waitState(t, s, c, flakyID, kyu.StateFailed)
		synctest.Wait() // the failures are counted and logged

		attrs, level, ok := logs.find("kyu: job handler panicked")
		if !ok || level != slog.LevelError || attrs["job_id"] != panicID || attrs["type"] != "boom" || attrs["error"] != "panic: boom" {
			t.Errorf("panic log: found %v, level %v, attrs %v; want error with job_id %s, type boom", ok, level, attrs, panicID)
		}
		attrs, level, ok = logs.find("kyu: job attempt failed; it will be retried")
		if !ok || level != slog.LevelInfo || attrs["job_id"] != flakyID || attrs["error"] != "flaky 1" {
			t.Errorf("retry log: found %v, level %v, attrs %v; want info for %s", ok, level, attrs, flakyID)
		}
		logs.mu.Lock()
		defer logs.mu.Unlock()
		final := map[string]string{}
		n := 0
		for _, r := range logs.records {
			if r.Message != "kyu: job failed for good" {
				continue
			}
			if r.Level != slog.LevelError {
				t.Errorf("final failure logged at %v, want error", r.Level)
			}
			var id, typ string
			r.Attrs(func(a slog.Attr) bool {
				switch a.Key {
				case "job_id":
					id = a.Value.String()
				case "type":
					typ = a.Value.String()
				}
				return true
			})
			final[id] = typ
			n++
		}
		if n != 2 || final[panicID] != "boom" || final[flakyID] != "flaky" {
			t.Errorf("%d final failures logged, for %v; want 2: %s (boom) and %s (flaky)", n, final, panicID, flakyID)
		}
	})
}
