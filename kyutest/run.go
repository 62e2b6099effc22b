package kyutest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/memory"
)

// Outcome is what one attempt of a job came to.
type Outcome struct {
	// Err is the error the handler returned, as it returned it (so
	// errors.Is and errors.As see through it); nil when it succeeded. A
	// handler that panicked gives a *PanicError.
	Err error
	// State is the job's state after the attempt, as the worker recorded
	// it: completed; retry (pending when the retry is due at once) after
	// an error; failed after a kyu.Permanent error or the last attempt;
	// cancelled after kyu.Cancel or a past deadline.
	State kyu.State
	// Result is what the handler set with Job.SetResult or SetResultJSON
	// (stored only when it succeeded).
	Result []byte
	// Progress is the last progress the handler reported (kyu.Progress),
	// nil if none.
	Progress *kyu.JobProgress
	// Logs are the lines the handler logged (kyu.Log, kyu.Logf).
	Logs []kyu.LogLine
	// Job is the job as stored after the attempt: attempt number, the
	// error of a failed attempt (with the stack of a panic), times.
	Job *kyu.Job
}

// UnmarshalResult decodes the JSON result into v.
func (o *Outcome) UnmarshalResult(v any) error {
	if err := json.Unmarshal(o.Result, v); err != nil {
		return fmt.Errorf("kyutest: result %q: %w", o.Result, err)
	}
	return nil
}

// PanicError is Outcome.Err of a handler that panicked.
type PanicError struct {
	// Value is what the handler panicked with.
	Value any
}

func (e *PanicError) Error() string { return fmt.Sprintf("kyutest: handler panicked: %v", e.Value) }

// Run enqueues the job spec describes into a fresh in-memory store, runs
// one attempt of it with h on a kyu.Worker, and returns its outcome once
// the worker has recorded it. The handler sees the job as a worker in
// production would give it: its context carries the job for kyu.Progress
// and kyu.Log, and ends at the job's Timeout.
//
// The job runs at once, whatever its RunAt or Delay, and is kept whatever
// its Retention; its other options (Queue, MaxAttempts, Timeout,
// Deadline, ...) apply as given. An attempt that fails is not tried
// again: Outcome.State says what a worker would do next. A spec the store
// refuses, or a deadline already past, fails the test. The handler runs
// on a goroutine of its own: it may call t.Error but not t.Fatal.
//
// Run needs nothing from the root package beyond its public API: a real
// Worker runs the handler, so what the handler reports takes the path it
// takes in production.
func Run(t testing.TB, h kyu.Handler, spec kyu.JobSpec) *Outcome {
	t.Helper()
	ctx := t.Context()
	if !spec.Deadline.IsZero() && !spec.Deadline.After(time.Now()) {
		t.Fatalf("kyutest.Run: the job's deadline %s has passed: a worker would cancel it unstarted", spec.Deadline.Format(time.RFC3339Nano))
	}
	spec.RunAt, spec.Delay = time.Time{}, 0
	spec.Retention = kyu.RetainForever // so the outcome can be read
	queue := spec.Queue
	if queue == "" {
		queue = "default"
	}
	store := memory.New()
	defer store.Close()
	client := kyu.NewClient(store, kyu.ClientConfig{})
	res, err := client.EnqueueMany(ctx, []kyu.JobSpec{spec})
	if err != nil {
		t.Fatalf("kyutest.Run: enqueue: %v", err)
	}
	id := res[0].ID
	// The job may end without its handler: cancelled at its deadline.
	finished, err := store.WatchFinished(ctx, backend.WatchParams{IDs: []string{id}})
	if err != nil {
		t.Fatalf("kyutest.Run: watch the job: %v", err)
	}
	defer finished.Close()

	out := &Outcome{}
	var once sync.Once
	returned := make(chan struct{})
	// end records the handler's error and pauses the queue before the
	// worker records the attempt, so that a retry due at once is not
	// claimed again.
	end := func(err error) {
		once.Do(func() {
			out.Err = err
			if _, perr := client.PauseQueue(context.WithoutCancel(ctx), queue); perr != nil {
				t.Errorf("kyutest.Run: pause queue %q: %v", queue, perr)
			}
			close(returned)
		})
	}
	run := kyu.HandlerFunc(func(ctx context.Context, j *kyu.Job) (err error) {
		defer func() {
			if v := recover(); v != nil {
				end(&PanicError{Value: v})
				panic(v) // for the worker to record, stack and all
			}
		}()
		err = h.ProcessJob(ctx, j)
		end(err)
		return err
	})
	w, err := kyu.NewWorker(store, kyu.WorkerConfig{
		Handler:            run,
		Queues:             map[string]int{queue: 1},
		ID:                 "kyutest",
		DisableMaintenance: true,
		Logger:             testLogger(t),
	})
	if err != nil {
		t.Fatalf("kyutest.Run: %v", err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatalf("kyutest.Run: start worker: %v", err)
	}
wait:
	for {
		select {
		case <-returned:
			break wait
		case <-finished.C:
			if j, err := client.Get(ctx, id); err != nil || j.State.Final() {
				break wait
			}
		case <-ctx.Done():
			break wait
		}
	}
	// Shutdown returns once the attempt's outcome is recorded.
	if err := w.Shutdown(context.WithoutCancel(ctx)); err != nil {
		t.Errorf("kyutest.Run: worker shutdown: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("kyutest.Run: the test ended before the handler returned")
	}
	j, err := client.Get(context.WithoutCancel(ctx), id)
	if err != nil {
		t.Fatalf("kyutest.Run: read the job after its attempt: %v", err)
	}
	out.State, out.Result, out.Progress, out.Logs, out.Job = j.State, j.Result, j.Progress, j.Logs, j
	return out
}
