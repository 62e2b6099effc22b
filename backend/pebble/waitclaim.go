package pebble

import (
	"context"
	"slices"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// waitingClaims are the claims waiting for work (see ClaimWait); mu guards
// them.
type waitingClaims struct {
	// list holds the waiting claims, oldest first: the oldest is filled
	// first.
	list []*waitingClaim
	// due names the queues in which a job became pending, since the
	// section under mu began, while claims were waiting: unlock fills the
	// claims waiting on them.
	due map[string]struct{}
	// closed is set once the store closes: no claim waits any more.
	closed bool
}

// waitingClaim is one ClaimWait waiting for work.
type waitingClaim struct {
	order []string
	p     backend.ClaimParams
	// since is when the claim began waiting, on the local clock: a claim
	// filled later leases its jobs at p.Now plus the time waited.
	since time.Time
	// filled receives the claim's jobs, with the group that writes them,
	// or the error that ended it; once only.
	filled chan waitFill
}

// waitFill is how a waiting claim ended.
type waitFill struct {
	got       []claimed
	truncated bool
	g         *commitGroup
	// now is the time the jobs were leased at.
	now time.Time
	err error
}

// ClaimWait is Claim that waits for work (see backend.WaitingClaimer):
// when nothing is claimable, the claim is registered, and the operation
// that makes a job of its queues pending (an enqueue, a retry, a
// promotion) claims it in the same section under mu, so the job's pending
// and active records go out in one commit with one sync.
func (s *Store) ClaimWait(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	if err := p.Check(); err != nil {
		return backend.ClaimResult{}, err
	}
	return s.claimWait(ctx, p)
}

func (s *store) claimWait(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	res, abandoned, err := s.claimWaiting(ctx, p)
	if abandoned != nil {
		// Released outside the operation: Release begins its own.
		s.releaseFill(context.WithoutCancel(ctx), abandoned)
	}
	return res, err
}

// claimWaiting is ClaimWait within one operation; a claim filled as ctx
// ended comes back in abandoned, for the caller to release.
func (s *store) claimWaiting(ctx context.Context, p backend.ClaimParams) (res backend.ClaimResult, abandoned *waitFill, err error) {
	if err := s.begin(ctx); err != nil {
		return backend.ClaimResult{}, nil, err
	}
	defer s.end()
	if p.Max <= 0 || len(p.Queues) == 0 {
		return backend.ClaimResult{}, nil, nil
	}
	order := distinct(p.Queues)
	if p.Mode == backend.ClaimWeighted {
		order = weightedOrder(order, p.Weights)
	}

	if err := s.lockState(); err != nil {
		return backend.ClaimResult{}, nil, err
	}
	mark := s.writes
	got, truncated, err := s.claimLocked(order, p, p.Now)
	if err != nil || len(got) > 0 || s.waiting.closed {
		g := s.groupSince(mark)
		closed := s.waiting.closed
		s.unlock()
		switch {
		case err != nil:
			return backend.ClaimResult{}, nil, err
		case len(got) == 0 && closed:
			return backend.ClaimResult{}, nil, backend.ErrClosed
		}
		if err := wait(g); err != nil {
			return backend.ClaimResult{}, nil, err
		}
		res, err = s.claimResult(got, truncated)
		return res, nil, err
	}
	w := &waitingClaim{order: order, p: p, since: time.Now(), filled: make(chan waitFill, 1)}
	s.waiting.list = append(s.waiting.list, w)
	s.unlock()

	var f waitFill
	select {
	case f = <-w.filled:
	case <-ctx.Done():
		s.mu.Lock()
		i := slices.Index(s.waiting.list, w)
		if i >= 0 {
			s.waiting.list = slices.Delete(s.waiting.list, i, i+1)
		}
		s.mu.Unlock()
		if i >= 0 {
			return backend.ClaimResult{}, nil, ctx.Err()
		}
		// Filled as it gave up: the jobs go back.
		if f = <-w.filled; f.err == nil {
			abandoned = &f
		}
		return backend.ClaimResult{}, abandoned, ctx.Err()
	}
	if f.err != nil {
		return backend.ClaimResult{}, nil, f.err
	}
	if err := wait(f.g); err != nil {
		return backend.ClaimResult{}, nil, err
	}
	res, err = s.claimResult(f.got, f.truncated)
	return res, nil, err
}

// releaseFill hands back the jobs of a waiting claim filled as it gave up;
// should that fail (the store broke or closed), their leases expire.
func (s *store) releaseFill(ctx context.Context, f *waitFill) {
	leases := make([]backend.Lease, len(f.got))
	for i, c := range f.got {
		leases[i] = backend.Lease{JobID: c.job.ID, Token: c.job.LeaseToken}
	}
	if _, err := s.Release(ctx, backend.ReleaseParams{Leases: leases, Now: f.now}); err != nil {
		s.log.Warn("release of an abandoned waiting claim failed; its jobs wait for their leases to expire", "err", err)
	}
}

// wakeWaiting notes that a job of queue became pending, for unlock to fill
// the claims waiting on it; mu must be held.
func (s *store) wakeWaiting(queue string) {
	if len(s.waiting.list) == 0 {
		return
	}
	if s.waiting.due == nil {
		s.waiting.due = make(map[string]struct{})
	}
	s.waiting.due[queue] = struct{}{}
}

// fillWaiting claims, for the waiting claims on the queues named by
// waiting.due, oldest first, in the section under mu that made their jobs
// pending; the claims' writes join that section's group. mu must be held.
func (s *store) fillWaiting() {
	due := s.waiting.due
	s.waiting.due = nil
	if s.broken != nil {
		return
	}
	for i := 0; i < len(s.waiting.list); {
		w := s.waiting.list[i]
		if !slices.ContainsFunc(w.order, func(q string) bool { _, ok := due[q]; return ok }) {
			i++
			continue
		}
		now := w.p.Now.Add(time.Since(w.since))
		got, truncated, err := s.claimLocked(w.order, w.p, now)
		if err == nil && len(got) == 0 {
			i++
			continue
		}
		s.waiting.list = slices.Delete(s.waiting.list, i, i+1)
		w.filled <- waitFill{got: got, truncated: truncated, g: s.pending, now: now, err: err}
	}
}

// closeWaiting ends every waiting claim with backend.ErrClosed, and any
// claim that would wait from now on.
func (s *store) closeWaiting() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting.closed = true
	for _, w := range s.waiting.list {
		w.filled <- waitFill{err: backend.ErrClosed}
	}
	s.waiting.list = nil
}
