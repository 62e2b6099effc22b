package kyu

import (
	"context"

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
	wc     backend.WaitingClaimer
	cancel context.CancelFunc
	// done receives the claim's answer; nil while no claim waits.
	done chan waitClaimResult
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
// claim order of this round.
func (c *waitClaim) start(ctx context.Context, f *fetcher, n int32) {
	parts := f.claimPlan(n)
	if len(parts) != 1 {
		return
	}
	p := backend.ClaimParams{
		Queues:   append([]string(nil), f.names[parts[0].from:parts[0].to]...),
		Mode:     backend.ClaimStrict,
		Max:      int(n),
		Lease:    f.w.cfg.Lease,
		WorkerID: f.w.cfg.ID,
		Now:      f.w.cfg.Clock.Now(),
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan waitClaimResult, 1)
	c.cancel, c.done = cancel, done
	go func() {
		res, err := c.wc.ClaimWait(wctx, p)
		done <- waitClaimResult{res: res, err: err}
	}()
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

// ended takes the answer received from answer: the jobs claimed are
// started, even if ctx has ended meanwhile (they are ours, as in
// fetcher.claim).
func (c *waitClaim) ended(f *fetcher, r waitClaimResult) error {
	c.cancel()
	c.cancel, c.done = nil, nil
	for _, rec := range r.res.Jobs {
		q := f.queueOf(rec.Queue)
		f.slots.acquire(q)
		f.w.startJob(f, q, rec)
	}
	return r.err
}

// stop gives up a waiting claim and starts what it claimed before it
// gave up, if anything.
func (c *waitClaim) stop(f *fetcher) {
	if !c.waiting() {
		return
	}
	c.cancel()
	_ = c.ended(f, <-c.done)
}
