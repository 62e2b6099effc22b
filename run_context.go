package kyu

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// runContext is a handler's context: it carries the run under runKey,
// ends at the job's timeout, and is cancelled, with a cause, by the
// worker. It lives inside the jobRun, so a job whose handler does not
// wait on its context costs no allocation for it.
//
// It keeps its own state (live, cancelled or timed out) until something
// needs a context of the context package's: Done (which every context
// derived from it calls first, to find the parent to register with), or
// a cancel with a cause (which only a *cancelCtx can report, through
// context.Cause). Then it grows a tree: a context.WithCancelCause over
// its timeout (runTimeout), to which its Done, Err and Value defer from
// then on, so that derived contexts register as children of a
// *cancelCtx (no goroutine, no callback of their own), and Err, Cause
// and Deadline read as under a context.WithTimeout and a
// context.WithCancelCause.
//
// The timeout is the worker's (see timeouts): at the deadline, Err
// begins to report context.DeadlineExceeded, and the tree, if grown, is
// cancelled through the AfterFunc registration of runTimeout, so that
// the tree's Err and Cause are context.DeadlineExceeded too.
//
// That WithCancelCause registers through its parent's AfterFunc method,
// and that a derived context (and context.Cause) asks for its parent's
// *cancelCtx under a Value key, after calling Done, are the context
// package's own (unexported there); should a Go release change them, the
// timeout would no longer end the handler's context, a cause would be
// lost, or derived contexts would each start a goroutine, and
// TestRunContextEnds, TestRunContextChildren or TestWorkerTimeoutContext
// fails. Kept for speed over a context.WithCancelCause made for every
// job, which cost 4 allocations, 168 bytes and about 0.8 cpu-µs a job in
// BenchmarkWorkerOverhead/rtt=0s (3.3 against 2.55 cpu-µs/job, medians of
// 6 alternating runs, 2 loaded CPUs).
type runContext struct {
	run *jobRun
	// deadline is when the job's timeout ends, in nanoseconds since the
	// worker's timeouts' epoch (see deadlineAfter); zero without a
	// timeout, and until the handler starts (Worker.begin). It is read
	// by the heartbeater too, hence atomic.
	deadline atomic.Int64
	// index is the context's place in the worker's timeouts, -1 when it
	// is not there; under their lock.
	index int32
	// state holds ctxCancelled or ctxTimedOut once the context has
	// ended, and ctxGrown once tree is set.
	state atomic.Int32

	// mu serializes the changes of state, and guards the fields below
	// until ctxGrown publishes tree.
	mu sync.Mutex
	// tree and cancelTree are the context.WithCancelCause over the
	// timeout (see runTimeout); onTimeout is what tree registered with
	// the timeout, nil without one.
	tree       context.Context
	cancelTree context.CancelCauseFunc
	onTimeout  func()
}

// The bits of runContext.state.
const (
	ctxCancelled int32 = 1 << iota // cancelled by the worker
	ctxTimedOut                    // ended at its deadline
	ctxGrown                       // tree is set

	ctxEnded = ctxCancelled | ctxTimedOut
)

// parent is the context the handler's context derives its values from.
func (c *runContext) parent() context.Context { return c.run.w().jobsCtx }

// Deadline is the end of the job's timeout, if it has one (the handler
// asks only once it has started, and with it the timeout).
func (c *runContext) Deadline() (time.Time, bool) {
	d := c.deadline.Load()
	if d == 0 {
		return c.parent().Deadline()
	}
	return c.run.w().timeouts.time(d), true
}

// Done is the tree's, grown on the first call.
func (c *runContext) Done() <-chan struct{} {
	if c.state.Load()&ctxGrown == 0 {
		c.mu.Lock()
		if c.state.Load()&ctxGrown == 0 {
			c.grow()
		}
		c.mu.Unlock()
	}
	return c.tree.Done()
}

// Err is context.Canceled once the worker has cancelled the context,
// context.DeadlineExceeded once its timeout has ended it.
func (c *runContext) Err() error {
	s := c.state.Load()
	switch {
	case s&ctxGrown != 0:
		return c.tree.Err()
	case s&ctxTimedOut != 0:
		return context.DeadlineExceeded
	case s&ctxCancelled != 0:
		return context.Canceled
	}
	return nil
}

// Value returns the run for runKey; other keys go to the tree, once
// grown (which answers for itself to context.Cause), else to the parent.
func (c *runContext) Value(key any) any {
	if _, ok := key.(runKey); ok {
		return c.run
	}
	if c.state.Load()&ctxGrown != 0 {
		return c.tree.Value(key)
	}
	return c.parent().Value(key)
}

// String names the context, as the context package's own do.
func (c *runContext) String() string { return "kyu.job(" + c.run.lease.JobID + ")" }

// cancel ends the context with context.Canceled, and the cause given (as
// a context.WithCancelCause's cancel does); nil is context.Canceled.
// Only the first end counts.
func (c *runContext) cancel(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.state.Load()
	if s&ctxEnded != 0 {
		return
	}
	if cause != nil && s&ctxGrown == 0 {
		// Only a *cancelCtx can carry a cause to context.Cause.
		c.grow()
	}
	if c.cancelTree != nil {
		c.cancelTree(cause)
	}
	c.state.Or(ctxCancelled)
}

// expire ends the context at its deadline, with context.DeadlineExceeded.
func (c *runContext) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.Load()&ctxEnded != 0 {
		return
	}
	c.state.Or(ctxTimedOut) // runTimeout.Err reports it from now
	if c.onTimeout != nil {
		c.onTimeout()
	}
}

// grow makes the tree, ended already if the context has; under mu.
func (c *runContext) grow() {
	c.tree, c.cancelTree = context.WithCancelCause((*runTimeout)(c))
	switch s := c.state.Load(); {
	case s&ctxTimedOut != 0 && c.onTimeout != nil:
		c.onTimeout()
	case s&ctxCancelled != 0:
		c.cancelTree(nil) // a cause would have grown the tree at once
	}
	c.state.Or(ctxGrown)
}

// runTimeout is the parent of a runContext's tree: it ends it at the
// job's timeout. Its Done is the worker's channel that is never closed,
// so that the tree registers through AfterFunc as it is made (it is
// never waited on); without a timeout it is nil, and the tree registers
// nothing.
type runTimeout runContext

func (t *runTimeout) ctx() *runContext { return (*runContext)(t) }

// Deadline is the handler's context's.
func (t *runTimeout) Deadline() (time.Time, bool) { return t.ctx().Deadline() }

// Done is never closed; nil without a timeout.
func (t *runTimeout) Done() <-chan struct{} {
	if t.run.timeout <= 0 {
		return nil
	}
	return t.run.w().never
}

// Err is context.DeadlineExceeded once the timeout has ended.
func (t *runTimeout) Err() error {
	if t.state.Load()&ctxTimedOut != 0 {
		return context.DeadlineExceeded
	}
	return nil
}

// Value asks the parent.
func (t *runTimeout) Value(key any) any { return t.ctx().parent().Value(key) }

// AfterFunc arranges for f to run at the deadline: the tree calls it once,
// as it is grown (under the runContext's mu). The returned stop does
// nothing: the run leaves the worker's timeouts when its handler returns
// (settle).
func (t *runTimeout) AfterFunc(f func()) (stop func() bool) {
	t.onTimeout = f
	return t.run.w().noStop
}
