package kyu

import (
	"context"
	"errors"
	"runtime"

	"github.com/kyuhq/kyu/backend"
)

// waitClaim is a fetcher's claim waiting for work in a store that can
// hold one (backend.WaitingClaimer): once its queues are empty, the
// fetcher registers one claim for its free slots, and the store fills it
// in the commit that makes a job pending, so an idle worker's job is
// enqueued and claimed with one sync instead of two. Only the fetcher's
// loop calls its methods. While it waits, the fetcher makes no other
// claim, so the slots it asked for stay free for it.
type waitClaim struct {
	wc backend.WaitingClaimer
	// done holds the claim's answer; nil while there is none to take.
	done chan waitClaimResult
	// answered is the channel done is set to, reused.
	answered chan waitClaimResult
	// asked is how many jobs the claim asked for.
	asked int32
}

// waitClaimResult is a waiting claim's answer.
type waitClaimResult struct {
	res backend.ClaimResult
	err error
}

// newWaitClaim returns the waiting claim of f, or nil when its store
// cannot hold one, when the worker's clock is not the system clock (a
// filled claim leases its jobs at its Now plus the time it waited, which
// a clock that tests drive would not agree with), or when a queue of the
// pool has a cap (a capped queue leaves the plan and comes back when it
// drops below its cap, which a claim waiting on the others would not see).
func newWaitClaim(f *fetcher) *waitClaim {
	wc, ok := f.w.b.(backend.WaitingClaimer)
	if !ok {
		return nil
	}
	if _, ok := f.w.cfg.Clock.(systemClock); !ok {
		return nil
	}
	for _, q := range f.queues {
		if q.max != 0 {
			return nil
		}
	}
	return &waitClaim{wc: wc}
}

// start registers a claim of up to n jobs from the pool's queues, in the
// claim order of this round, and waits for its answer on the fetcher's
// own goroutine, until a job comes, ctx ends or the poll interval passes
// (the poll renews the claim: should its store have missed a job, the
// next claim finds it). It starts the jobs claimed at once, and leaves
// the answer on answer for the fetcher's loop. Waiting here rather than
// on a goroutine of its own spares each job a goroutine handoff between
// the store's commit and the handler. While it waits the fetcher serves
// nothing else, which loses nothing: its free slots are the claim's,
// wake-up signals coalesce, and a subscription obtained meanwhile waits
// to be adopted.
func (c *waitClaim) start(ctx context.Context, f *fetcher, n int32) {
	parts := f.claimPlan(n)
	if len(parts) != 1 {
		return
	}
	p := backend.ClaimParams{
		Queues:   f.names[parts[0].from:parts[0].to],
		Mode:     backend.ClaimStrict,
		Max:      int(n),
		Lease:    f.w.cfg.Lease,
		WorkerID: f.w.cfg.ID,
		Now:      f.w.cfg.Clock.Now(),
	}
	if c.answered == nil {
		c.answered = make(chan waitClaimResult, 1)
	}
	c.asked = n
	wctx, cancel := context.WithTimeout(ctx, f.w.cfg.PollInterval)
	res, err := c.wc.ClaimWait(wctx, p)
	// The jobs claimed start before anything else is done, even if ctx
	// has ended meanwhile (they are ours, as in fetcher.claim): the
	// context's end and the answer's bookkeeping in the fetcher's loop
	// come after the handler has started.
	f.w.startJobs(f, res.Jobs)
	if len(res.Jobs) > 0 {
		// Let the handler goroutine just handed a job run before the
		// fetcher goes on: it waits on this P's run queue, and would
		// otherwise start only once the fetcher's next claim and the
		// next waiting claim have been made.
		runtime.Gosched()
	}
	cancel()
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		// The poll interval passed with no job: not a failure.
		err = nil
	}
	c.done = c.answered
	c.done <- waitClaimResult{res: res, err: err}
}

// waiting says whether a claim waits.
func (c *waitClaim) waiting() bool { return c != nil && c.done != nil }

// answer returns the channel the waiting claim's answer arrives on, nil
// while none waits.
func (c *waitClaim) answer() <-chan waitClaimResult {
	if c == nil {
		return nil
	}
	return c.done
}

// drained reports whether answer r, received from answer, took fewer
// jobs than its claim asked for (its queues had none left then), with no
// error.
func (c *waitClaim) drained(r waitClaimResult) bool {
	return r.err == nil && !r.res.Truncated && len(r.res.Jobs) < int(c.asked)
}

// ended takes the answer received from answer (start has started its
// jobs) and returns its error.
func (c *waitClaim) ended(r waitClaimResult) error {
	c.done = nil
	return r.err
}

// stop takes the answer of a claim that waited, if any is left to take
// (its jobs have started).
func (c *waitClaim) stop() {
	if !c.waiting() {
		return
	}
	_ = c.ended(<-c.done)
}
