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
	// payloads holds, in a section under mu that enqueues jobs while
	// claims wait, the payloads of its pending jobs (the enqueuer's bytes,
	// not copied), so that a claim filled in the same section hands its
	// job over with a copy of them instead of reading them back from
	// Pebble; unlock forgets them.
	payloads map[jobID][]byte
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
	err       error
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
	if err := s.begin(ctx); err != nil {
		return backend.ClaimResult{}, err
	}
	defer s.end()
	if p.Max <= 0 || len(p.Queues) == 0 {
		return backend.ClaimResult{}, nil
	}
	order := claimOrder(p)

	if err := s.lockState(); err != nil {
		return backend.ClaimResult{}, err
	}
	mark := s.writes
	got, truncated, err := s.claimLocked(order, p, p.Now)
	if err != nil || len(got) > 0 || s.waiting.closed {
		g := s.groupSince(mark)
		closed := s.waiting.closed
		s.unlock()
		switch {
		case err != nil:
			return backend.ClaimResult{}, err
		case len(got) == 0 && closed:
			return backend.ClaimResult{}, backend.ErrClosed
		}
		if err := wait(g); err != nil {
			return backend.ClaimResult{}, err
		}
		return s.claimResult(got, truncated)
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
			return backend.ClaimResult{}, ctx.Err()
		}
		// Filled before it gave up: its jobs are handed over once their
		// commit ends (see deliverFills), and are the caller's, as a
		// Claim's are once it has taken them.
		f = <-w.filled
	}
	if f.err != nil {
		return backend.ClaimResult{}, f.err
	}
	if err := wait(f.g); err != nil {
		return backend.ClaimResult{}, err
	}
	return s.claimResult(f.got, f.truncated)
}

// noteEnqueued keeps the payload of a pending job enqueued in this section
// while claims wait, for a claim filled in it (claimed.payload); mu must
// be held.
func (s *store) noteEnqueued(id jobID, payload []byte) {
	if len(s.waiting.list) == 0 || payload == nil {
		return
	}
	if s.waiting.payloads == nil {
		s.waiting.payloads = make(map[jobID][]byte)
	}
	s.waiting.payloads[id] = payload
}

// enqueuedPayload returns a copy of the payload of a job enqueued in this
// section (noteEnqueued), or nil when there is none to hand over; mu must
// be held.
func (s *store) enqueuedPayload(id jobID) []byte {
	p, ok := s.waiting.payloads[id]
	if !ok {
		return nil
	}
	return append(make([]byte, 0, len(p)), p...)
}

// wakeWaiting notes that a job of queue became pending, for unlock to fill
// the claims waiting on it, and reports whether claims wait (unlock then
// decides whether the queue's subscribers need a signal); mu must be held.
func (s *store) wakeWaiting(queue string) bool {
	if len(s.waiting.list) == 0 {
		return false
	}
	if s.waiting.due == nil {
		s.waiting.due = make(map[string]struct{})
	}
	s.waiting.due[queue] = struct{}{}
	return true
}

// fillWaiting claims, for the waiting claims on the queues named by
// waiting.due, oldest first, in the section under mu that made their jobs
// pending; the claims' writes join that section's group. The queues in
// which a job is still pending after the fills are signalled once the
// group is durable; the others not: their new jobs are taken, and a
// wake-up would only cost a subscriber an empty claim. mu must be held.
func (s *store) fillWaiting() {
	due := s.waiting.due
	s.waiting.due = nil
	defer s.wakeLeft(due)
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
		f := waitFill{got: got, truncated: truncated, g: s.pending, err: err}
		if err != nil || f.g == nil {
			w.filled <- f
			continue
		}
		// Handed over by the committer once the group is durable, so the
		// claim's goroutine wakes once, after the sync, not also before.
		f.g.fills = append(f.g.fills, groupFill{w: w, f: f})
	}
}

// wakeLeft asks for a signal to the subscribers of each queue of due that
// still has a pending job, once the pending group is durable; mu must be
// held.
func (s *store) wakeLeft(due map[string]struct{}) {
	g := s.pending
	if g == nil {
		return
	}
	for q := range due {
		if qi := s.idx.queues[q]; qi == nil || qi.ready.len() > 0 {
			g.wakeQueue(q)
		}
	}
}

// groupFill is a waiting claim filled in a group, handed its jobs once
// the group is durable (see deliverFills).
type groupFill struct {
	w *waitingClaim
	f waitFill
}

// deliverFills hands the waiting claims filled in g their jobs, once g's
// commit has ended (g.err says how).
func deliverFills(g *commitGroup) {
	for _, d := range g.fills {
		d.w.filled <- d.f
	}
	g.fills = nil
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
