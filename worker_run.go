package kyu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// errGoexit is the outcome of a handler that called runtime.Goexit (as
// t.FailNow does) instead of returning.
var errGoexit = errors.New("handler called runtime.Goexit")

// abandonedMessage is the error recorded for an attempt whose handler did
// not return within its timeout plus timeoutGrace.
const abandonedMessage = "handler did not return within its timeout (plus grace); abandoned"

// jobRun is the worker's side of a running job: the handler's view of the
// job, its lease, and what the handler reports back through the Job's
// methods. One allocation carries both the Job and the run.
type jobRun struct {
	job   Job
	lease backend.Lease
	// jobType, attempt and timeout are kept apart from job, which the
	// handler may change.
	jobType string
	attempt int
	timeout time.Duration
	// f is the fetcher that claimed the job, q its queue in f's pool.
	f *fetcher
	q *poolQueue
	// hold says how the run holds its slot once its handler has returned
	// (see slots); set by settle before the run is queued to the
	// completer.
	hold slotHold
	// lastAttempt says whether the attempt is the job's last (Attempt >=
	// MaxAttempts): a bool, not MaxAttempts, so that it shares hold's
	// word and the run its size class.
	lastAttempt bool

	// state is where the run stands; see runState for the transitions.
	state runMachine
	// expires is the lease's known expiry in Unix nanoseconds of the
	// worker's Clock: the claim's LeaseExpiresAt, then the ExpiresAt of
	// each successful heartbeat. Only the heartbeater reads and writes it
	// after the run starts.
	expires atomic.Int64

	// result is what the handler set with SetResult, nil if nothing.
	result atomic.Pointer[[]byte]

	// ctx is the handler's context; it carries the run for Progress and
	// Log.
	ctx runContext

	// report holds what the handler reported (Progress, Log) and is not
	// yet sent, from its first report on; reportClosed is set when the
	// handler has returned or been abandoned. lastReport is what was still
	// pending when the handler returned, sent by the completer just before
	// the outcome. logLines is the number of lines the job had when
	// claimed.
	report       atomic.Pointer[runReport]
	reportClosed atomic.Bool
	// tracked is the run's index in Worker.runs, -1 once forgotten; under
	// Worker.runsMu.
	tracked    int32
	lastReport *backend.ReportItem
	logLines   int

	// failure is the outcome, written by the handler goroutine before it
	// hands the run to the completer: nil means success. Only a failed
	// attempt allocates it, which keeps a run within a smaller size class.
	failure *runFailure
}

// runFailure is a failed attempt: the handler's error and what the store
// is told.
type runFailure struct {
	err  error
	item backend.FailItem
}

// w is the worker running r.
func (r *jobRun) w() *Worker { return r.f.w }

// cancel ends the handler's context with a cause (ErrLeaseLost when the
// lease is lost or about to expire unrenewed; nil when the handler has
// returned). The run leaves the worker's timeouts in settle.
func (r *jobRun) cancel(cause error) { r.ctx.cancel(cause) }

func (r *jobRun) setResult(b []byte) {
	b = append([]byte(nil), b...)
	r.result.Store(&b)
}

func (r *jobRun) takeResult() []byte {
	if b := r.result.Load(); b != nil {
		return *b
	}
	return nil
}

// newRun builds the run of a job just claimed from f's queue. The record
// is the worker's own, so its slices are shared with the Job, not copied.
func newRun(rec *backend.Job, f *fetcher, q *poolQueue) *jobRun {
	r := &jobRun{
		lease:       backend.Lease{JobID: rec.ID, Token: rec.LeaseToken},
		jobType:     rec.Type,
		attempt:     rec.Attempt,
		lastAttempt: rec.Attempt >= rec.MaxAttempts,
		timeout:     rec.Timeout,
		f:           f,
		q:           q,
	}
	r.expires.Store(rec.LeaseExpiresAt.UnixNano())
	r.logLines = len(rec.Logs) + rec.LogsDropped
	fillJob(&r.job, rec)
	r.job.run = r
	r.ctx.run, r.ctx.index = r, -1
	return r
}

// startJobs begins the jobs one Claim call returned to f: it takes their
// slots, and queues them to f's handler goroutines (see handoff), starting
// one if none is waiting and none is on its way. The runs of the call are
// tracked (so their leases are kept alive while they wait for a handler)
// and queued each under one lock, not one per job. A job's timeout starts
// with its handler (see begin), not here: a job claimed ahead may wait.
// Called only from f's loop.
func (w *Worker) startJobs(f *fetcher, recs []*backend.Job) {
	if len(recs) == 0 {
		return
	}
	runs, handing := f.starting[:0], f.handing[:0]
	for _, rec := range recs {
		q := f.queueOf(rec.Queue)
		f.slots.acquire(q)
		run := newRun(rec, f, q)
		runs = append(runs, run)
		handing = append(handing, handed{run: run, ctx: &run.ctx})
	}
	w.track(runs)
	if f.handoff.put(handing) {
		w.startHandler(f)
	}
	clear(runs)
	clear(handing)
	f.starting, f.handing = runs[:0], handing[:0]
}

// begin starts a run's handler time: it is counted running, and its
// timeout, if it has one, starts now (on the real, monotonic clock:
// timeouts run on real time whatever the Clock says).
func (w *Worker) begin(run *jobRun) {
	w.stats.running.Add(1)
	if run.timeout > 0 {
		run.ctx.deadline.Store(deadlineAfter(w.timeouts.now(), run.timeout))
		w.timeouts.add(&run.ctx)
	}
}

// startHandler starts a handler goroutine of f, called to its queue.
func (w *Worker) startHandler(f *fetcher) {
	f.goroutines.Add(1)
	go w.handlerLoop(f)
}

// handlerLoop runs the jobs f queues, one after the other, until f's loop
// has stopped and no job is left. Reusing goroutines spares each job a
// goroutine's start and the growth of its stack, and taking the next
// queued job before waiting spares most jobs of a batch a wake-up (see
// handoff). A handler that calls runtime.Goexit ends its goroutine; one
// whose run is taken from it (its timeout overrun, or Shutdown past its
// grace) ends it when it returns, and f starts others meanwhile. A
// handler that locks its OS thread or sets pprof labels must undo it
// before it returns (Handler says so).
//
// Kept for speed over a plain goroutine per job, which drained
// BenchmarkWorkerOverhead/rtt=0s at 375k jobs/s instead of 517k (CPU
// 2.7 instead of 1.8 µs/job) and BenchmarkDrain50 on the embedded store
// at 44k instead of 65k jobs/s (go test -bench 'Drain|WorkerOverhead'
// -benchtime 20000x, medians of 3 alternating rounds, 2 loaded CPUs).
func (w *Worker) handlerLoop(f *fetcher) {
	defer f.goroutines.Add(-1)
	// busy is set while the goroutine counts in the handoff's busy
	// handlers: from a take that returned a job to the next take, unless
	// the run was taken from its handler (whoever took it left the count).
	coming, busy := true, false
	defer func() {
		// A handler called runtime.Goexit: its place goes to another.
		if busy && f.handoff.leave() {
			w.startHandler(f)
		}
	}()
	for {
		job, start := f.handoff.take(coming, busy)
		busy = job.run != nil
		if !busy {
			return
		}
		if start {
			w.startHandler(f)
		}
		w.begin(job.run)
		w.execute(job.ctx, job.run, &busy)
		if !busy {
			return
		}
		coming = false
	}
}

// execute runs the handler and hands its outcome to the completer. The
// bookkeeping runs deferred, so a handler that panics or calls
// runtime.Goexit still gives back its slot and has its attempt recorded.
// It clears *busy when the run was taken from its handler meanwhile
// (see settle).
func (w *Worker) execute(ctx context.Context, run *jobRun, busy *bool) {
	var err error
	returned := false
	defer func() {
		var stack string
		if !returned {
			stack = string(debug.Stack())
			switch p := recover(); {
			case p == nil:
				err = errGoexit
			case isError(p):
				err = fmt.Errorf("panic: %w", p.(error))
			default:
				err = fmt.Errorf("panic: %v", p)
			}
			if !errors.Is(err, errGoexit) {
				w.log.Error("kyu: job handler panicked", "job_id", run.lease.JobID, "type", run.jobType,
					"attempt", run.attempt, "error", err, "stack", stack)
			}
		}
		if !w.settle(run, err, stack) {
			*busy = false
		}
	}()
	run.state.start()
	err = w.cfg.Handler.ProcessJob(ctx, &run.job)
	returned = true
}

func isError(v any) bool {
	_, ok := v.(error)
	return ok
}

// settle deals with the outcome of a handler that has ended: it is dropped
// when the worker has abandoned the run or given up on its lease, and
// otherwise queued to the completer. It reports false when the run had
// been taken from its handler (abandoned or timed out): whoever took it
// has taken its goroutine out of the handoff's busy count.
func (w *Worker) settle(run *jobRun, err error, stack string) (kept bool) {
	run.cancel(nil)
	if d := run.ctx.deadline.Load(); d != 0 {
		w.timeouts.remove(&run.ctx)
		// How long the handler ran, from its deadline: whether its pool
		// claims ahead goes by it (slots.aheadNow). A pool that never
		// claims ahead spares the clock read.
		if d != math.MaxInt64 && run.f.slots.ahead > 0 {
			run.f.slots.ran(w.timeouts.now() - (d - int64(run.timeout)))
		}
	}
	w.stats.processed.Add(1)
	w.stats.running.Add(-1)

	switch run.state.returned(err != nil) {
	case runFinished:
	case runDropped:
		// The lease is lost, or was about to expire unrenewed: the job is
		// (or will soon be) someone else's.
		run.closeReport()
		w.log.Debug("kyu: job's lease was lost; outcome dropped",
			"job_id", run.lease.JobID, "type", run.jobType, "error", err)
		w.finish([]*jobRun{run})
		return true
	default:
		// Whoever took the run from its handler has sent its reports.
		w.log.Debug("kyu: outcome of an abandoned job dropped",
			"job_id", run.lease.JobID, "type", run.jobType, "error", err)
		return false
	}
	// No more reports; what is pending goes just before the outcome.
	if item, ok := run.closeReport(); ok {
		run.lastReport = new(item) // allocated only when there is one
	}
	if err != nil {
		w.setFailure(run, err, stack)
	}
	run.hold = run.f.slots.releaseEarly(run.q)
	w.comp.send(run)
	return true
}

// setFailure records err as the run's outcome, with its retry time.
func (w *Worker) setFailure(run *jobRun, err error, stack string) {
	run.failure = &runFailure{err: err, item: w.failItem(run, err, stack)}
}

// failItem builds the backend's record of a failed attempt; its message
// and stack are made valid text within their size limits, which every
// store can keep.
func (w *Worker) failItem(run *jobRun, err error, stack string) backend.FailItem {
	item := backend.FailItem{
		Lease:   run.lease,
		Message: backend.TruncateText(backend.TextOf(err.Error()), backend.MaxFailMessage),
		Stack:   backend.TruncateText(backend.TextOf(stack), backend.MaxFailStack),
		Final:   IsPermanent(err),
		Cancel:  isCancel(err),
	}
	if !item.Final && !item.Cancel {
		item.RetryAt = retryTime(w.cfg.Clock.Now(), w.backoff(run.jobType, run.attempt, err))
	}
	return item
}

// retryTime is now+d, kept within the range of times a job may carry: a
// negative delay means now, and a delay past backend.MaxTime gives the
// last representable instant.
func retryTime(now time.Time, d time.Duration) time.Time {
	last := backend.MaxTime().Add(-time.Nanosecond)
	switch {
	case d <= 0:
		return now
	case d >= last.Sub(now): // Sub saturates, so this never overflows
		return last
	}
	return now.Add(d)
}
