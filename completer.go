package kyu

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/internal/lifecycle"
)

// completerMaxBatch bounds the outcomes recorded in one backend call.
const completerMaxBatch = 1000

// completerLinger is how long the completer waits for more outcomes while
// other handlers are still running, before it records what it has.
const completerLinger = 200 * time.Microsecond

// completerRetries is how many times a Complete or Fail call that failed as
// a whole is tried again before its outcomes are given up (the jobs then
// return when their leases expire).
const completerRetries = 3

// completer records the outcomes of finished jobs: it gathers every
// outcome that is waiting and records them with one Complete and one Fail
// call, then frees the jobs' slots.
//
// Handlers append their outcomes to pending under mu, and wake the
// completer only when it has something to do: for the first outcome it
// would take, when the last running handler returns, or when a full batch
// waits. Outcomes that come while a call is on its way just wait for the
// next one; no handler wakes the completer for each job.
type completer struct {
	w    *Worker
	wake chan struct{} // signalled (coalescing) as send says
	loop lifecycle.Loop

	// claiming counts the Claim calls in flight (fetcher.claim), started
	// counts those begun.
	claiming atomic.Int32
	started  atomic.Uint64

	mu      sync.Mutex
	pending []*jobRun // outcomes not yet taken, in order
	stopped bool      // the completer has taken its last outcomes

	// Reused between flushes; only the completer goroutine touches them.
	batch, done, failed, reported []*jobRun
	completes                     []backend.CompleteItem
	reports                       []backend.ReportItem
	linger                        *time.Timer
	fails                         []backend.FailItem
}

func newCompleter(w *Worker, capacity int) *completer {
	return &completer{
		w:       w,
		wake:    make(chan struct{}, 1),
		pending: make([]*jobRun, 0, capacity),
	}
}

// send hands a finished run to the completer. If the completer has
// stopped, the outcome is dropped: the job's lease has then been released
// or will expire.
func (c *completer) send(run *jobRun) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		c.w.log.Debug("kyu: outcome after the worker stopped dropped", "job_id", run.lease.JobID, "type", run.jobType)
		return
	}
	c.pending = append(c.pending, run)
	n := len(c.pending)
	c.mu.Unlock()
	// The handler's running count is already lowered (settle), so the
	// last handler to return sees zero.
	if n == 1 || n >= completerMaxBatch || c.w.stats.running.Load() == 0 {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

func (c *completer) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			// Record what is already queued, then refuse the rest.
			for {
				left := c.take(true)
				if len(c.batch) > 0 {
					c.flush(ctx)
				}
				if !left {
					return
				}
			}
		case <-c.wake:
			c.gather(ctx)
			if len(c.batch) > 0 {
				c.flush(ctx)
			}
		}
	}
}

// take moves the pending outcomes, at most completerMaxBatch, into
// c.batch, and reports whether outcomes are left pending. With last set,
// taking the last of them marks the completer stopped in the same step,
// so that no later outcome is left behind unrecorded.
func (c *completer) take(last bool) (left bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(len(c.pending), completerMaxBatch)
	c.batch = append(c.batch[:0], c.pending[:n]...)
	rest := copy(c.pending, c.pending[n:])
	clear(c.pending[rest:])
	c.pending = c.pending[:rest]
	if last && rest == 0 {
		c.stopped = true
	}
	return rest > 0
}

// pendingCount is how many outcomes wait.
func (c *completer) pendingCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// gather takes the waiting outcomes into c.batch. While handlers are still
// running it lingers up to completerLinger for their outcomes, woken when
// the last returns or a full batch waits: jobs claimed together tend to
// finish together, and one call for all of them costs one sync. It does
// not wait for jobs that are claimed but not started: once the handlers of
// a batch have all returned, their outcomes go with the claim of the next
// batch, as it begins (see awaitClaim), to share its commit.
func (c *completer) gather(ctx context.Context) {
	n := c.pendingCount()
	if n > 0 && n < completerMaxBatch && c.w.stats.running.Load() > 0 {
		if c.linger == nil {
			c.linger = time.NewTimer(completerLinger)
		} else {
			c.linger.Reset(completerLinger)
		}
	wait:
		for c.w.stats.running.Load() > 0 && c.pendingCount() < completerMaxBatch {
			select {
			case <-c.wake:
			case <-c.linger.C:
				break wait
			case <-ctx.Done():
				break wait
			}
		}
		c.linger.Stop()
	}
	c.awaitClaim(ctx)
	if c.take(false) {
		// More than a batch waits: come back at once.
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// flush records c.batch and frees its slots. It records with a context of
// its own, bounded by outcomeTimeout: stopping the completer (which
// cancels ctx) must not throw away outcomes being recorded.
func (c *completer) flush(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.w.outcomeTimeout)
	defer cancel()
	c.done, c.failed, c.reported = c.done[:0], c.failed[:0], c.reported[:0]
	c.completes, c.fails, c.reports = c.completes[:0], c.fails[:0], c.reports[:0]
	for _, run := range c.batch {
		if run.lastReport != nil {
			c.reported = append(c.reported, run)
			c.reports = append(c.reports, *run.lastReport)
		}
		if run.failure == nil {
			c.done = append(c.done, run)
			c.completes = append(c.completes, backend.CompleteItem{Lease: run.lease, Result: run.takeResult()})
		} else {
			c.failed = append(c.failed, run)
			c.fails = append(c.fails, run.failure.item)
		}
	}
	complete := func() {
		res, err := retryBatch(ctx, c, func(ctx context.Context) (backend.BatchResult, error) {
			return c.w.b.Complete(ctx, backend.CompleteParams{Items: c.completes, Now: c.w.cfg.Clock.Now()})
		})
		c.account(c.done, res, err, "complete")
	}
	fail := func() {
		res, err := retryBatch(ctx, c, func(ctx context.Context) (backend.BatchResult, error) {
			return c.w.b.Fail(ctx, backend.FailParams{Items: c.fails, Now: c.w.cfg.Clock.Now()})
		})
		c.account(c.failed, res, err, "fail")
	}
	// Progress and log lines first: a line logged before the handler
	// returned is stored before the job is final.
	c.w.sendReports(ctx, c.reported, c.reports)
	switch {
	case len(c.fails) == 0:
		complete()
	case len(c.completes) == 0:
		fail()
	default:
		// Both at once, so a store that groups commits syncs once.
		var wg sync.WaitGroup
		wg.Go(fail)
		complete()
		wg.Wait()
	}
	c.w.finish(c.batch)
	clear(c.batch)
	clear(c.done)
	clear(c.failed)
	clear(c.completes)
	clear(c.fails)
	clear(c.reported)
	clear(c.reports)
}

// retryBatch calls fn, trying again a few times, with a growing pause, when
// the call fails as a whole.
func retryBatch(ctx context.Context, c *completer, fn func(context.Context) (backend.BatchResult, error)) (backend.BatchResult, error) {
	pause := 50 * time.Millisecond
	for try := 0; ; try++ {
		res, err := fn(ctx)
		if err == nil || try == completerRetries || ctx.Err() != nil || errors.Is(err, backend.ErrClosed) {
			return res, err
		}
		c.w.log.Warn("kyu: recording outcomes failed; retrying", "error", err, "pause", pause)
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return res, err
		}
		pause *= 4
	}
}

// account counts and logs the per-job answers of a Complete or Fail call.
func (c *completer) account(runs []*jobRun, res backend.BatchResult, err error, op string) {
	w := c.w
	if err != nil {
		w.log.Error("kyu: could not record outcomes; the jobs run again when their leases expire",
			"op", op, "jobs", len(runs), "error", err)
		return
	}
	for i, run := range runs {
		var itemErr error
		if i < len(res.Errors) {
			itemErr = res.Errors[i]
		}
		switch {
		case itemErr == nil && run.failure == nil:
			w.stats.succeeded.Add(1)
		case itemErr == nil:
			w.stats.failed.Add(1)
			if errors.Is(run.failure.err, ErrNoHandler) {
				w.stats.unknownType.Add(1)
			}
			w.logFailure(run)
		case errors.Is(itemErr, backend.ErrLeaseLost):
			w.log.Debug("kyu: outcome refused: the job's lease was lost", "op", op, "job_id", run.lease.JobID, "type", run.jobType)
		default:
			w.log.Warn("kyu: outcome refused", "op", op, "job_id", run.lease.JobID, "type", run.jobType, "error", itemErr)
		}
	}
}

// logFailure logs a failed attempt that was recorded: at Error when the
// job failed for good (a permanent error, or its last attempt), at Info
// when it will be retried (retries are routine) and at Debug when the
// handler cancelled it.
func (w *Worker) logFailure(run *jobRun) {
	f := run.failure
	attrs := []any{"job_id", run.lease.JobID, "type", run.jobType, "attempt", run.attempt, "error", f.err}
	switch {
	case f.item.Cancel:
		w.log.Debug("kyu: job cancelled by its handler", attrs...)
	case f.item.Final || run.lastAttempt:
		w.log.Error("kyu: job failed for good", attrs...)
	default:
		w.log.Info("kyu: job attempt failed; it will be retried", append(attrs, "retry_at", f.item.RetryAt)...)
	}
}

// awaitClaim holds the outcomes back, up to completerLinger, until a
// fetcher that is claiming as slots free up begins its next claim, so
// that a store that groups commits writes them with that claim: recorded
// alone just before it, they would take a sync of their own that the
// claim, and the handlers waiting for its jobs, would wait for. It does
// not wait while a claim is under way (the outcomes join it or the group
// after it) or when no fetcher is about to claim.
func (c *completer) awaitClaim(ctx context.Context) {
	if c.claiming.Load() > 0 || !c.claimDue() {
		return
	}
	n := c.pendingCount()
	if n == 0 || n >= completerMaxBatch {
		return
	}
	mark := c.started.Load()
	if c.linger == nil {
		c.linger = time.NewTimer(completerLinger)
	} else {
		c.linger.Reset(completerLinger)
	}
	defer c.linger.Stop()
	for c.started.Load() == mark && c.pendingCount() < completerMaxBatch && c.claimDue() {
		select {
		case <-c.wake:
		case <-c.linger.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// claimDue reports whether a fetcher of the worker claims as slots free
// up, none of them held until outcomes are recorded (slots.releaseEarly):
// such a fetcher waits for the completer.
func (c *completer) claimDue() bool {
	due := false
	for _, f := range c.w.fetchers {
		if f.slots.held.Load() > 0 {
			return false
		}
		due = due || f.active.Load()
	}
	return due
}

// setActive records whether f's loop claims as slots free up (see
// completer.awaitClaim), and tells the completer when it stops: outcomes
// held for its next claim go at once.
func (f *fetcher) setActive(on bool) {
	if f.active.Swap(on) && !on {
		f.w.comp.nudge()
	}
}

// claimStarts is called as a fetcher begins a Claim call: outcomes held
// for it go now.
func (c *completer) claimStarts() {
	c.claiming.Add(1)
	c.started.Add(1)
	c.nudge()
}

// nudge wakes the completer (coalescing).
func (c *completer) nudge() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}
