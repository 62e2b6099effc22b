package redis

import (
	"context"
	"slices"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// ClaimWait is Claim that waits for work (see backend.WaitingClaimer):
// when nothing is claimable, it waits for a wake-up of its queues (the
// Pub/Sub message of every script that makes a job pending; notify.go)
// and claims again at once, in the goroutine that received the signal and
// on a connection of its own when one is free (runconn.go).
//
// An idle worker then starts a job with fewer goroutine hand-offs than a
// fetcher that hears the wake-up and claims through the shared,
// pipelined connection: the signal goes straight to the claiming
// goroutine, and rueidis writes the claim and reads its reply in that
// goroutine instead of its writer's and reader's. An enqueue of this
// Store fills the claim without a wake-up, in its own round trip: its
// claim sent behind its own script, or in it (handoff.go).
func (s *Store) ClaimWait(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	if err := p.Check(); err != nil {
		return backend.ClaimResult{}, err
	}
	return s.claimWait(ctx, p)
}

func (s *store) claimWait(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	if err := s.enter(); err != nil {
		return backend.ClaimResult{}, err
	}
	defer s.leave()
	if p.Max <= 0 || len(p.Queues) == 0 {
		return backend.ClaimResult{}, nil
	}
	// Subscribed before the first claim: a job that becomes pending after
	// that claim looked signals the subscription.
	began, at := time.Now(), p.Now
	// An enqueue of this store may fill the claim while it waits
	// (handoff.go).
	hc := newHandoffClaim(p, began)
	w := &waiter{queues: slices.Clone(p.Queues), c: make(chan struct{}, 1), handoff: hc}
	sub, err := s.notify.add(ctx, w)
	if err != nil {
		return backend.ClaimResult{}, err
	}
	defer sub.Close()
	var filled chan handoffFill
	if hc != nil {
		filled = hc.filled
		defer s.handoffs.withdraw(hc)
	}
	for claim := true; ; {
		if claim {
			// A claim filled later leases its jobs from when it is filled.
			p.Now = at.Add(time.Since(began))
			res, err := s.claimOwn(ctx, p)
			if err != nil || len(res.Jobs) > 0 {
				return s.claimedWaiting(ctx, res, err, p.Now)
			}
		}
		if hc != nil {
			s.handoffs.register(hc)
		}
		var end error
		select {
		case <-w.c:
			claim = true
			if hc == nil || s.handoffs.withdraw(hc) {
				continue
			}
			// An enqueue took the claim: its answer is on its way, and the
			// claim is made again if it got nothing.
		case f := <-filled:
			if len(f.res.Jobs) > 0 {
				return s.claimedWaiting(ctx, f.res, nil, time.Now())
			}
			claim = f.signalled
			continue
		case <-ctx.Done():
			end = ctx.Err()
		case <-s.done:
			end = backend.ErrClosed
		}
		if end != nil && (hc == nil || s.handoffs.withdraw(hc)) {
			return backend.ClaimResult{}, end
		}
		// An enqueue took the claim and answers soon: the claim is in
		// flight, and what it took is returned or released as a claim of
		// this loop's is.
		f := <-filled
		if len(f.res.Jobs) > 0 {
			return s.claimedWaiting(ctx, f.res, nil, time.Now())
		}
		if end != nil {
			return backend.ClaimResult{}, end
		}
		claim = claim || f.signalled
	}
}

// claimedWaiting ends a waiting claim with jobs res it took (at now) or
// error err: the jobs are returned, or released when ctx has ended.
func (s *store) claimedWaiting(ctx context.Context, res backend.ClaimResult, err error, now time.Time) (backend.ClaimResult, error) {
	if len(res.Jobs) > 0 && ctx.Err() != nil {
		s.releaseClaimed(res, now)
		return backend.ClaimResult{}, ctx.Err()
	}
	return res, err
}

// claimOwn is one claim of ClaimWait: on a connection of its own when one
// is free, else on the shared one. Once sent, a claim is not abandoned
// for ctx (its retries are bounded by Options.RetryFor): jobs it took
// come back and are released when ctx has ended meanwhile.
func (s *store) claimOwn(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	octx := context.WithoutCancel(ctx)
	var rc *runConn
	if !s.opts.Cluster {
		rc = s.runConns.take(s.client)
	}
	if rc == nil {
		return s.claim(octx, s.client, p, true)
	}
	res, err := s.claim(octx, rc.c, p, true)
	s.runConns.give(rc, err != nil)
	return res, err
}

// releaseClaimed gives back the jobs of a waiting claim filled as its ctx
// ended.
func (s *store) releaseClaimed(res backend.ClaimResult, now time.Time) {
	leases := make([]backend.Lease, len(res.Jobs))
	for i, j := range res.Jobs {
		leases[i] = backend.Lease{JobID: j.ID, Token: j.LeaseToken}
	}
	ctx := context.Background()
	if _, err := s.Release(ctx, backend.ReleaseParams{Leases: leases, Now: now}); err != nil {
		s.log.Warn("release of an abandoned waiting claim failed; its jobs wait for their leases to expire", "err", err)
	}
}
