package redis

import (
	"context"
	"slices"
	"strings"
	"sync"
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
	claim := true
	// An enqueue of this store may fill the claim while it waits
	// (handoff.go). The subscription of the last claim of this worker and
	// queues, if it was filled with the queue's last jobs, is taken over
	// with its claim: with no signal since, nothing has become pending
	// that a claim now would find, and none is made (keptWaits).
	key := keptKey(p)
	w, sub := s.kept.take(key)
	hc := (*handoffClaim)(nil)
	if w != nil {
		hc = w.handoff
		hc.p, hc.began = p, began
		select {
		case <-w.c:
		default:
			claim = false
		}
	} else {
		hc = newHandoffClaim(p, began)
		w = &waiter{queues: slices.Clone(p.Queues), c: make(chan struct{}, 1), handoff: hc}
		var err error
		if sub, err = s.notify.add(ctx, w); err != nil {
			return backend.ClaimResult{}, err
		}
	}
	// keep is set when the claim returns jobs that left its queue empty.
	keep := false
	defer func() {
		if !keep || !s.kept.put(key, w, sub) {
			sub.Close()
		}
	}()
	var filled chan handoffFill
	if hc != nil {
		filled = hc.filled
		defer s.handoffs.withdraw(hc)
	}
	for {
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
				// The subscription is kept when the claim left its queue
				// empty (fewer jobs than asked for, not cut short by a
				// budget) and no wake-up came while it was filled
				// (signalled): a wake-up then may be for a job it missed.
				keep = key != "" && !f.signalled && !f.res.Truncated && len(f.res.Jobs) < p.Max && ctx.Err() == nil
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

// keptWaits holds, per worker and claim (keptKey), the subscription of a
// waiting claim that an enqueue filled with the last jobs of its queue,
// until that worker's next waiting claim takes it over (or a newer one
// takes its place, or keptFor passes).
//
// A waiting claim claims once it has subscribed, before it waits: jobs
// may have become pending before its subscription could hear of them.
// That claim finds nothing when the claim before it was filled with its
// queue's last jobs, and no wake-up has come since; the worker's next
// waiting claim then comes at once (an idle worker goes on waiting), and
// the claim is one round trip and one script run per idle job for
// nothing. A subscription kept since before the last claim that looked
// hears of every job that became pending since (every script that makes
// a job pending publishes, save an enqueue whose jobs a waiting claim
// took all of; a lost Pub/Sub connection signals every subscription once
// it is back): the next waiting claim that takes it over with no signal
// pending makes no claim before it waits, and one with a signal pending
// claims as any does. keptFor bounds what it may miss beyond that: work
// that comes due without a wake-up, which the claim script does (a
// waiting job's deadline) and which a waiting claim otherwise meets only
// at its poll.
type keptWaits struct {
	mu     sync.Mutex
	subs   map[string]keptWait
	closed bool
}

// keptWait is a kept subscription, its waiter (whose handoff is its
// claim, filled and not registered) and when it was kept.
type keptWait struct {
	w   *waiter
	sub *backend.Subscription
	at  time.Time
}

// keptFor is how long a kept subscription may be taken over.
const keptFor = time.Second

// keptKey is the key in keptWaits of the waiting claim p, "" for one
// whose subscription is not kept: a claim that no enqueue fills
// (newHandoffClaim), and one with a type filter or a byte budget, which
// may leave its queue's other jobs pending.
func keptKey(p backend.ClaimParams) string {
	if p.Mode == backend.ClaimWeighted || len(p.Queues) == 0 || !leanClaim(p) {
		return ""
	}
	return p.WorkerID + "\x00" + strings.Join(p.Queues, "\x00")
}

// take returns the subscription kept under key, and its waiter, or nil.
func (k *keptWaits) take(key string) (*waiter, *backend.Subscription) {
	if key == "" {
		return nil, nil
	}
	k.mu.Lock()
	kw, ok := k.subs[key]
	if ok {
		delete(k.subs, key)
	}
	k.mu.Unlock()
	if !ok {
		return nil, nil
	}
	if time.Since(kw.at) > keptFor {
		kw.sub.Close()
		return nil, nil
	}
	return kw.w, kw.sub
}

// put keeps sub, whose waiter is w, under key, in place of the one kept
// there, and closes that one and those kept longer than keptFor (whose
// workers stopped waiting, or stopped); false means it is not kept (key
// is "", or the store is closing).
func (k *keptWaits) put(key string, w *waiter, sub *backend.Subscription) bool {
	if key == "" {
		return false
	}
	now := time.Now()
	var drop []*backend.Subscription
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return false
	}
	if old, ok := k.subs[key]; ok {
		drop = append(drop, old.sub)
	}
	for kk, kw := range k.subs {
		if kk != key && now.Sub(kw.at) > keptFor {
			delete(k.subs, kk)
			drop = append(drop, kw.sub)
		}
	}
	if k.subs == nil {
		k.subs = map[string]keptWait{}
	}
	k.subs[key] = keptWait{w: w, sub: sub, at: now}
	k.mu.Unlock()
	for _, d := range drop {
		d.Close()
	}
	return true
}

// close closes the subscriptions kept, and keeps none after.
func (k *keptWaits) close() {
	k.mu.Lock()
	subs := k.subs
	k.subs, k.closed = nil, true
	k.mu.Unlock()
	for _, kw := range subs {
		kw.sub.Close()
	}
}
