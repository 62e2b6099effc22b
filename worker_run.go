package kyu

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/kyuhq/kyu/backend"
)

// The states of a jobRun. A run starts running; the handler goroutine moves
// it to returned when the handler returns, unless Shutdown has abandoned it
// first (its lease released).
const (
	runRunning int32 = iota
	runReturned
	runAbandoned
)

// jobRun is the worker's side of a running job: the handler's view of the
// job, its lease, and what the handler reports back through the Job's
// methods. One allocation carries both the Job and the run.
type jobRun struct {
	job   Job
	lease backend.Lease
	// jobType and attempt are kept apart from job, which the handler may
	// change.
	jobType string
	attempt int
	f       *fetcher
	cancel  context.CancelFunc
	// early is set, before the run is queued to the completer, when its
	// slot was freed as its handler returned (fetcher.freeEarly).
	early bool

	state atomic.Int32 // runRunning, runReturned or runAbandoned
	// exited is set once the handler has returned (or panicked).
	exited atomic.Bool
	// lost is set by the heartbeater before it cancels the context of a
	// job whose lease is no longer live.
	lost atomic.Bool

	mu     sync.Mutex
	result []byte

	// The outcome, written by the handler goroutine before it hands the
	// run to the completer: err nil means success.
	err     error
	failure backend.FailItem
}

func (r *jobRun) setResult(b []byte) {
	r.mu.Lock()
	r.result = append([]byte(nil), b...)
	r.mu.Unlock()
}

func (r *jobRun) takeResult() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.result
}

// newRun builds the run of a job just claimed from f's queue. The record
// is the worker's own, so its slices are shared with the Job, not copied.
func newRun(rec *backend.Job, f *fetcher) *jobRun {
	r := &jobRun{
		lease:   backend.Lease{JobID: rec.ID, Token: rec.LeaseToken},
		jobType: rec.Type,
		attempt: rec.Attempt,
		f:       f,
	}
	r.job = Job{
		ID: rec.ID, Type: rec.Type, Queue: rec.Queue, Payload: rec.Payload, Title: rec.Title,
		Priority: rec.Priority, State: rec.State, Attempt: rec.Attempt, MaxAttempts: rec.MaxAttempts,
		RunAt: rec.RunAt, Timeout: rec.Timeout, Deadline: rec.Deadline,
		UniqueKey: rec.UniqueKey, UniqueFor: rec.UniqueFor, Tags: rec.Tags, Metadata: rec.Metadata,
		Retention: rec.Retention, CreatedAt: rec.CreatedAt, StartedAt: rec.StartedAt,
		FinishedAt: rec.FinishedAt, WorkerID: rec.WorkerID, Errors: rec.Errors,
		Result: rec.Result, CancelReason: rec.CancelReason,
		run: r,
	}
	return r
}

// startJob begins a claimed job in its own goroutine. The job's slot in f
// is already taken.
func (w *Worker) startJob(f *fetcher, rec *backend.Job) {
	run := newRun(rec, f)
	var ctx context.Context
	if rec.Timeout > 0 {
		ctx, run.cancel = context.WithTimeout(w.jobsCtx, rec.Timeout)
	} else {
		ctx, run.cancel = context.WithCancel(w.jobsCtx)
	}
	w.track(run)
	w.stats.running.Add(1)
	go w.execute(ctx, run)
}

// execute runs the handler and hands its outcome to the completer.
func (w *Worker) execute(ctx context.Context, run *jobRun) {
	stack, err := w.callHandler(ctx, &run.job)
	run.cancel()
	run.exited.Store(true)
	w.stats.processed.Add(1)
	w.stats.running.Add(-1)

	if !run.state.CompareAndSwap(runRunning, runReturned) {
		w.dropAbandoned(run, err)
		return
	}
	run.f.returned.Add(1)
	if err != nil {
		if run.lost.Load() {
			w.dropLost(run, err)
			return
		}
		w.setFailure(run, err, stack)
	}
	run.early = run.f.freeEarly()
	w.comp.send(run)
}

// dropAbandoned drops the outcome of a job Shutdown gave up on: its lease
// was released, so whatever the handler says now belongs to nobody.
//
//go:noinline
func (w *Worker) dropAbandoned(run *jobRun, err error) {
	w.log.Debug("kyu: outcome of a job released at shutdown dropped",
		"job_id", run.lease.JobID, "type", run.jobType, "error", err)
}

// dropLost drops the failure of a job whose lease was lost (its context
// was cancelled for that reason): the job is someone else's now.
//
//go:noinline
func (w *Worker) dropLost(run *jobRun, err error) {
	w.log.Debug("kyu: job's lease was lost; outcome dropped",
		"job_id", run.lease.JobID, "type", run.jobType, "error", err)
	w.finish([]*jobRun{run})
}

// setFailure records err as the run's outcome, with its retry time.
//
//go:noinline
func (w *Worker) setFailure(run *jobRun, err error, stack string) {
	run.err = err
	run.failure = backend.FailItem{
		Lease:   run.lease,
		Message: err.Error(),
		Stack:   stack,
		Final:   IsPermanent(err),
	}
	if !run.failure.Final {
		run.failure.RetryAt = w.cfg.Clock.Now().Add(w.cfg.backoff(run.jobType, run.attempt, err))
	}
}

// callHandler runs the handler, turning a panic into an error and a stack.
func (w *Worker) callHandler(ctx context.Context, job *Job) (stack string, err error) {
	defer func() {
		if p := recover(); p != nil {
			stack = string(debug.Stack())
			if perr, ok := p.(error); ok {
				err = fmt.Errorf("panic: %w", perr)
			} else {
				err = fmt.Errorf("panic: %v", p)
			}
		}
	}()
	return "", w.cfg.Handler.ProcessJob(ctx, job)
}
