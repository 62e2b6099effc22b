package postgres

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// ClaimWait is Claim that waits for work (see backend.WaitingClaimer).
// When nothing is claimable, the claim waits in the store: an Enqueue of
// this process that makes a job of its queues pending takes it, and
// claims for it in the enqueue's own transaction (for one job, in its
// insert), so the job is enqueued and claimed with one commit and one WAL
// flush (fillclaim.go). Jobs made pending otherwise (other processes,
// retries, promotions) wake it as they wake a subscriber, and it claims
// again.
func (s *Store) ClaimWait(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	if err := p.Check(); err != nil {
		return backend.ClaimResult{}, err
	}
	return s.claimWait(ctx, p)
}

// waitingClaims are the claims waiting in the store for an enqueue to fill
// them. The zero value is ready to use.
type waitingClaims struct {
	// n is len(list): an enqueue looks no further while it is 0, which
	// costs the enqueue of a store without waiting claims one atomic load.
	n  atomic.Int32
	mu sync.Mutex
	// list holds the claims waiting, oldest first: the oldest is taken
	// first.
	list []*waitingClaim
	// closed is set once the store closes: no claim waits any more.
	closed bool
}

// waitingClaim is one ClaimWait waiting for work.
type waitingClaim struct {
	p      backend.ClaimParams
	queues []string // the queues of p it claims from
	// since is when the claim began, on the local clock: a claim filled
	// later leases its jobs at p.Now plus the time since.
	since time.Time
	// filled receives, once for each time an enqueue took the claim, what
	// the enqueue's transaction claimed for it (nothing when it failed or
	// found nothing), or ErrClosed when the store closed.
	filled chan claimFill
}

// claimFill is what a waiting claim got.
type claimFill struct {
	res backend.ClaimResult
	err error
}

// now is the claim's time at the local clock's present.
func (w *waitingClaim) now() time.Time { return w.p.Now.Add(time.Since(w.since)) }

// params are the claim's parameters as of now.
func (w *waitingClaim) params() backend.ClaimParams {
	p := w.p
	p.Now = w.now()
	return p
}

func (s *store) claimWait(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.ClaimResult{}, err
	}
	s.end()
	// The queues it claims from (weighted, those of a weight above 0), as
	// Claim: none, and it takes nothing.
	queues := claimOrder(p)
	if p.Max <= 0 || len(queues) == 0 {
		return backend.ClaimResult{}, nil
	}
	// Subscribed before the first claim: a job made pending after that
	// claim looked, by an enqueue that found no claim waiting, signals it.
	sub, err := s.Subscribe(ctx, backend.SubscribeParams{Queues: queues})
	if err != nil {
		return backend.ClaimResult{}, err
	}
	defer sub.Close()
	w := &waitingClaim{p: p, queues: queues, since: time.Now(), filled: make(chan claimFill, 1)}
	for {
		res, err := s.claimOnce(ctx, w.params())
		if err != nil || len(res.Jobs) > 0 {
			return res, err
		}
		if !s.waiting.add(w) {
			return backend.ClaimResult{}, backend.ErrClosed
		}
		var f claimFill
		select {
		case f = <-w.filled:
		case <-sub.C:
			if s.waiting.remove(w) {
				continue // not taken: claim again
			}
			f = <-w.filled // an enqueue is filling it
		case <-ctx.Done():
			select {
			case f = <-w.filled: // filled before it looked: its jobs are ours
			default:
				if s.waiting.remove(w) {
					return backend.ClaimResult{}, ctx.Err()
				}
				// An enqueue took it as it gave up: what that enqueue's
				// commit claims for it is given back.
				f = <-w.filled
				if f.err == nil && len(f.res.Jobs) > 0 {
					s.handBack(ctx, f.res.Jobs, w.now())
				}
				return backend.ClaimResult{}, ctx.Err()
			}
		}
		if f.err != nil || len(f.res.Jobs) > 0 {
			return f.res, f.err
		}
		// The enqueue failed or its claim found nothing (another claimer
		// took the job): claim and wait again.
	}
}

// claimOnce is one Claim of ClaimWait. Once sent it is not abandoned for
// ctx, which could leave the jobs it took active with no one to run them:
// jobs it took as ctx ended are given back.
func (s *store) claimOnce(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	res, err := s.Claim(context.WithoutCancel(ctx), p)
	if err == nil && ctx.Err() != nil {
		s.handBack(ctx, res.Jobs, p.Now)
		return backend.ClaimResult{}, ctx.Err()
	}
	return res, err
}

// add registers w as waiting; false when the store has closed.
func (c *waitingClaims) add(w *waitingClaim) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.list = append(c.list, w)
	c.n.Store(int32(len(c.list)))
	return true
}

// remove takes w off the list; false when it was not on it (an enqueue
// took it, or the store closed), and then an answer is on its way to
// w.filled.
func (c *waitingClaims) remove(w *waitingClaim) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.list, w)
	if i < 0 {
		return false
	}
	c.list = slices.Delete(c.list, i, i+1)
	c.n.Store(int32(len(c.list)))
	return true
}

// take takes off the list, oldest first, the claims waiting on a queue of
// pending for as long as the jobs they ask for are fewer than jobs (the
// pending jobs an enqueue makes). The caller answers each on its filled
// channel.
func (c *waitingClaims) take(pending []string, jobs int) []*waitingClaim {
	c.mu.Lock()
	defer c.mu.Unlock()
	var took []*waitingClaim
	for i := 0; i < len(c.list) && jobs > 0; {
		w := c.list[i]
		if !slices.ContainsFunc(w.queues, func(q string) bool { return slices.Contains(pending, q) }) {
			i++
			continue
		}
		c.list = slices.Delete(c.list, i, i+1)
		took = append(took, w)
		jobs -= w.p.Max
	}
	c.n.Store(int32(len(c.list)))
	return took
}

// close ends every waiting claim with backend.ErrClosed, and any claim
// that would wait from now on.
func (c *waitingClaims) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, w := range c.list {
		w.filled <- claimFill{err: backend.ErrClosed}
	}
	c.list = nil
	c.n.Store(0)
}
