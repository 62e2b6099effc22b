package kyu

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// runKey is the context key under which a Worker puts the running job's
// run into its handler's context.
type runKey struct{}

// runContext is the parent of a handler's context: it carries the run
// under runKey, and the job's timeout. It lives inside the jobRun, so it
// costs no allocation of its own.
//
// The timeout is its own rather than a context.WithTimeout's: the
// handler's context (a context.WithCancelCause over it, so that causes
// still reach context.Cause) registers with it through AfterFunc, and the
// worker's timeouts call that registration at the deadline after Err has
// begun to report context.DeadlineExceeded. The handler's context then
// ends with the same Err and Cause, and reports the same Deadline, as
// under a WithTimeout, with no further context, channel, map or timer.
//
// That WithCancelCause registers through its parent's AfterFunc method is
// the context package's own (an unexported interface there); should a Go
// release stop it, the timeout would no longer end the handler's context,
// and TestWorkerTimeoutContext fails. Kept for speed over the plain
// WithValue, WithTimeout and WithCancelCause, which drained
// BenchmarkWorkerOverhead/rtt=0s at 297k jobs/s instead of 517k (CPU
// 3.1 instead of 1.8 µs/job, 11 instead of 5 allocations a job) and
// BenchmarkDrain50 on the embedded store at 52k instead of 65k jobs/s
// (go test -bench 'Drain|WorkerOverhead' -benchtime 20000x, medians of 3
// alternating rounds, 2 loaded CPUs).
type runContext struct {
	context.Context
	run *jobRun
	// deadline is when the job's timeout ends, in nanoseconds since the
	// worker's timeouts' epoch (see deadlineAfter); zero without a
	// timeout, and until the handler starts (Worker.begin). It is read
	// by the heartbeater too, hence atomic.
	deadline atomic.Int64
	// timedOut is set when the timeout has fired, before the child is
	// cancelled.
	timedOut atomic.Bool
	// onTimeout is what the child registered; index is the context's place
	// in the worker's timeouts, -1 when it is not there. Both are the
	// timeouts' (under their lock) once added.
	index     int32
	onTimeout func()
}

// Deadline is the end of the job's timeout, if it has one (the handler
// asks only once it has started, and with it the timeout).
func (c *runContext) Deadline() (time.Time, bool) {
	d := c.deadline.Load()
	if d == 0 {
		return c.Context.Deadline()
	}
	return c.run.w().timeouts.time(d), true
}

// Done is nil without a timeout. With one it is the worker's channel that
// is never closed, so that the handler's context registers through
// AfterFunc as it is made, at the claim (it is never waited on: only the
// handler's context is handed out); see runContext.
func (c *runContext) Done() <-chan struct{} {
	if c.run.timeout <= 0 {
		return c.Context.Done()
	}
	return c.run.w().never
}

// Err is context.DeadlineExceeded once the timeout has fired.
func (c *runContext) Err() error {
	if c.timedOut.Load() {
		return context.DeadlineExceeded
	}
	return c.Context.Err()
}

// AfterFunc arranges for f to run at the deadline: the handler's context
// calls it once, as it is made, to be cancelled then. The context enters
// the worker's timeouts as its handler starts (Worker.begin). The returned stop does nothing: the run
// leaves the worker's timeouts when its handler returns (settle), which
// the handler context's cancel precedes.
func (c *runContext) AfterFunc(f func()) (stop func() bool) {
	c.onTimeout = f
	return c.run.w().noStop
}

// expire ends the handler's context at its deadline.
func (c *runContext) expire() {
	c.timedOut.Store(true)
	c.onTimeout()
}

// Value returns the run for runKey, and asks the parent for other keys.
func (c *runContext) Value(key any) any {
	if _, ok := key.(runKey); ok {
		return c.run
	}
	return c.Context.Value(key)
}

// runFrom returns the run of the handler whose context ctx is, or an
// error matching ErrNotInHandler.
func runFrom(ctx context.Context) (*jobRun, error) {
	run, _ := ctx.Value(runKey{}).(*jobRun)
	if run == nil {
		return nil, ErrNotInHandler
	}
	return run, nil
}

// Progress records the progress of the job whose handler's context ctx is:
// percent in [0, 100] and a short message (at most 1 KiB of UTF-8). It
// replaces the progress reported before, also by an earlier attempt, and
// is visible as Job.Progress, with the time it was recorded.
//
// Reports are sent to the store in batches, a fraction of a second after
// the call, and in any case before the job's outcome is recorded; a store
// that refuses them is logged by the worker, not returned here. Progress
// returns a *ValidationError for bad input, and an error matching
// ErrNotInHandler outside a handler or once its handler has returned.
func Progress(ctx context.Context, percent float64, msg string) error {
	run, err := runFrom(ctx)
	if err != nil {
		return fmt.Errorf("kyu: progress: %w", err)
	}
	p := &backend.Progress{Percent: percent, Message: msg}
	if err := checkReport(backend.ReportItem{Progress: p}); err != nil {
		return err
	}
	return run.w().reports.add(run, p, "")
}

// Log appends a line to the log of the job whose handler's context ctx
// is, stamped with the time it is recorded. A job keeps the first
// WorkerConfig.MaxLogLines lines of all its attempts; lines past the cap
// are counted in Job.LogsDropped, and the worker logs once per job when a
// job first logs past it. A line is at most 8 KiB of UTF-8.
//
// Lines are sent as Progress reports are, and a line logged before the
// handler returns is stored before the job's outcome. Log returns a
// *ValidationError for bad input, and an error matching ErrNotInHandler
// outside a handler or once its handler has returned.
func Log(ctx context.Context, line string) error {
	run, err := runFrom(ctx)
	if err != nil {
		return fmt.Errorf("kyu: log: %w", err)
	}
	if err := checkReport(backend.ReportItem{Logs: []string{line}}); err != nil {
		return err
	}
	return run.w().reports.add(run, nil, line)
}

// Logf is Log with a line formatted as fmt.Sprintf does.
func Logf(ctx context.Context, format string, args ...any) error {
	return Log(ctx, fmt.Sprintf(format, args...))
}

// checkReport validates one report with the store's own checks, as a
// *ValidationError outside a batch.
func checkReport(item backend.ReportItem) error {
	p := backend.ReportParams{Items: []backend.ReportItem{item}, Now: backend.MinTime()}
	err := p.Check()
	var verr *ValidationError
	if errors.As(err, &verr) {
		c := *verr
		c.Index = -1
		return &c
	}
	return err
}
