package kyu

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/internal/lifecycle"
)

// fetcherLinger bounds how long a fetcher with some free slots waits for
// running handlers to free more before it claims a partial batch.
const fetcherLinger = 100 * time.Microsecond

// fetcher claims the jobs of one pool: a queue with its own concurrency,
// or the queues of WorkerConfig.Pool. It claims up to min(free slots,
// batch) jobs per Claim call, from all its queues at once, whenever slots
// are free and a queue may hold claimable jobs. It learns that a queue may
// hold jobs from a full claim, from the backend's wake-up signals (see
// wakeups), from a poll every PollInterval, and from a queue that drops
// below its cap.
type fetcher struct {
	w *Worker
	// queues are the pool's queues in their configured order; weighted
	// says whether each claim orders them at random by weight (rng, used
	// only by the fetcher's loop) instead of strictly.
	queues   []*poolQueue
	weighted bool
	rng      *rand.Rand
	slots    *slots
	batch    int32 // most jobs per claim
	loop     lifecycle.Loop

	// handoff passes claimed jobs to the handler goroutines (see
	// Worker.handlerLoop); it is closed when the fetcher's loop ends, which
	// ends the waiting goroutines and hands back the jobs claimed ahead that
	// no handler will start (see Worker.releaseUnstarted). goroutines counts the handler
	// goroutines, running a handler or waiting.
	handoff    *handoff
	goroutines atomic.Int32

	// active is set while the loop claims whenever slots free up (the
	// pool's queues may hold jobs, and no waiting claim is registered):
	// the completer then holds outcomes for its next claim (see
	// completer.awaitClaim).
	active atomic.Bool

	// order, names and parts are reused by claimPlan, starting and
	// handing by Worker.startJobs; only the loop uses them.
	order    []*poolQueue
	names    []string
	parts    []claimPart
	starting []*jobRun
	handing  []handed
}

// newFetcher returns the fetcher of a pool of queues sharing concurrency
// slots, which may claim ahead jobs beyond them.
func newFetcher(w *Worker, queues []*poolQueue, weighted bool, concurrency, batch, ahead int) *fetcher {
	return &fetcher{
		w:        w,
		queues:   queues,
		weighted: weighted,
		rng:      rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		slots:    newSlots(concurrency, ahead),
		batch:    int32(batch),
		handoff:  newHandoff(concurrency),
	}
}

// queueNames lists the fetcher's queues.
func (f *fetcher) queueNames() []string {
	names := make([]string, len(f.queues))
	for i, q := range f.queues {
		names[i] = q.name
	}
	return names
}

// queueOf returns the pool's queue of a claimed job.
func (f *fetcher) queueOf(name string) *poolQueue {
	if len(f.queues) == 1 {
		return f.queues[0]
	}
	for _, q := range f.queues {
		if q.name == name {
			return q
		}
	}
	// A store handed out a job of a queue not asked for: count its slot
	// in the first queue rather than lose track of it.
	f.w.log.Error("kyu: claim returned a job of a queue not asked for", "queue", name)
	return f.queues[0]
}

// claimPart is one Claim call of a claim round: the queues
// names[from:to], and room, the most jobs the call may take because of a
// cap, or -1 when only the round's size bounds it.
type claimPart struct {
	from, to int
	room     int32
}

// claimPlan returns the Claim calls of a round of up to n jobs, in f.names
// and f.parts. The queues not at their cap are taken in order (strict, or
// drawn by weight) and asked in one call, except that a queue whose cap
// leaves it less room than n is asked alone, for no more than its room,
// so that it never goes over its cap and does not shrink the claim for
// the others. The calls are made in order until the round has n jobs:
// a call that takes fewer jobs than it asked for found its queues empty
// (or the one queue at its cap), so the order is kept.
func (f *fetcher) claimPlan(n int32) []claimPart {
	f.order = f.order[:0]
	for _, q := range f.queues {
		if q.room() != 0 {
			f.order = append(f.order, q)
		}
	}
	if f.weighted {
		weightedOrder(f.rng, f.order)
	}
	f.names, f.parts = f.names[:0], f.parts[:0]
	from := 0
	for i, q := range f.order {
		f.names = append(f.names, q.name)
		room := q.room()
		if room < 0 || room >= n {
			continue
		}
		if from < i {
			f.parts = append(f.parts, claimPart{from: from, to: i, room: -1})
		}
		f.parts = append(f.parts, claimPart{from: i, to: i + 1, room: room})
		from = i + 1
	}
	if from < len(f.order) {
		f.parts = append(f.parts, claimPart{from: from, to: len(f.order), room: -1})
	}
	return f.parts
}

// claim makes the Claim calls of a round of up to n jobs (see claimPlan)
// and starts the jobs claimed, even if ctx has ended meanwhile: they are
// ours now, and the end of the loop hands back those not yet started. It
// returns how many it claimed, and stops at the first error.
func (f *fetcher) claim(ctx context.Context, n int32) (got int32, err error) {
	for _, part := range f.claimPlan(n) {
		want := n - got
		if part.room >= 0 {
			want = min(want, part.room)
		}
		f.w.comp.claimStarts()
		res, err := f.w.b.Claim(ctx, backend.ClaimParams{
			Queues:   f.names[part.from:part.to],
			Mode:     backend.ClaimStrict,
			Max:      int(want),
			Lease:    f.w.cfg.Lease,
			WorkerID: f.w.cfg.ID,
			Now:      f.w.cfg.Clock.Now(),
		})
		f.w.comp.claiming.Add(-1)
		f.w.startJobs(f, res.Jobs)
		got += int32(len(res.Jobs))
		if err != nil || got >= n {
			return got, err
		}
	}
	return got, nil
}

// weightedOrder reorders queues at random by weight: the first is drawn
// with a chance in proportion to its weight, the next likewise from those
// left, and so on.
func weightedOrder(rng *rand.Rand, queues []*poolQueue) {
	for i := range queues {
		total := 0
		for _, q := range queues[i:] {
			total += q.weight
		}
		r := rng.IntN(total)
		j := i
		for ; j < len(queues)-1; j++ {
			r -= queues[j].weight
			if r < 0 {
				break
			}
		}
		queues[i], queues[j] = queues[j], queues[i]
	}
}

func (f *fetcher) run(ctx context.Context) {
	// Only this loop hands jobs to handler goroutines; the jobs claimed
	// ahead that none will start go back to their queue at once.
	defer func() { f.w.releaseUnstarted(f.handoff.close()) }()
	defer f.setActive(false)
	names := f.queueNames()
	log := f.w.log.With("queue", names[0])
	if len(names) > 1 {
		log = f.w.log.With("queues", names)
	}
	wakeups := newWakeups(f.w.b, names, log)
	wakeups.start(ctx)
	defer wakeups.close()
	poll := time.NewTicker(f.w.cfg.PollInterval)
	defer poll.Stop()
	// waiter, when the store offers it, claims for the idle fetcher in the
	// commit that makes a job pending; it is off after a failure until the
	// next poll.
	waiter := newWaitClaim(f)
	defer waiter.stop()
	waitOK := true

	// more is true while the queue may hold claimable jobs.
	more := true
	// linger runs while the fetcher waits for more slots before a partial
	// claim; lingered is set when it fired.
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	defer linger.Stop()
	var lingering, lingered bool
	for {
		if more && !waiter.waiting() {
			n, wait := f.slots.claimSize(f.batch, lingered)
			switch {
			case wait && !lingering:
				linger.Reset(fetcherLinger)
				lingering = true
			case n > 0:
				if lingering {
					linger.Stop()
				}
				lingering, lingered = false, false
				got, err := f.claim(ctx, n)
				switch {
				case err != nil:
					if ctx.Err() != nil {
						return
					}
					log.Error("kyu: claim failed; retrying at the next poll", "error", err)
					more = false
				case got < n:
					// Every queue asked is empty or at its cap (a queue
					// that drops below its cap sets more again).
					more = false
				default:
					continue // a full claim: there may be more
				}
			}
		}
		// Say how many free slots are worth a wake-up, then look again:
		// a slot freed before the store was judged by the old want.
		if f.slots.uncapped.Swap(false) {
			more = true
		}
		// A waiting claim holds the free slots: none is worth a wake-up.
		if f.slots.setWant(more && !waiter.waiting(), f.batch) {
			continue
		}
		f.setActive(more && !waiter.waiting())
		var lingerC <-chan time.Time
		if lingering {
			lingerC = linger.C
		}
		if !more && !lingering && waitOK && waiter != nil && !waiter.waiting() {
			if n, _ := f.slots.claimSize(f.batch, true); n > 0 {
				waiter.start(ctx, f, n)
			}
		}
		select {
		case <-ctx.Done():
			return
		case r := <-waiter.answer():
			drained := waiter.drained(r)
			if err := waiter.ended(r); err != nil {
				if ctx.Err() != nil {
					return
				}
				log.Error("kyu: waiting claim failed; claiming at the next poll", "error", err)
				waitOK = false
			}
			// Look again: jobs may have come since the claim was filled.
			// When its queues were left empty and a slot is free, the
			// next waiting claim, which starts below at once and claims
			// before it waits (backend.WaitingClaimer), is that look: a
			// claim of the fetcher's own would be one more empty claim
			// per idle job.
			n, _ := f.slots.claimSize(f.batch, true)
			more = !drained || n == 0
		case <-f.slots.freed:
		case _, open := <-wakeups.signals():
			if !open {
				wakeups.ended(ctx)
			}
			more = true
		case sub := <-wakeups.got:
			// Signals were missed while there was no subscription.
			wakeups.adopt(sub)
			more = true
		case <-poll.C:
			// A waiting claim is renewed too: should its store have
			// missed a job, the poll still finds it.
			waiter.stop()
			more, waitOK = true, true
		case <-lingerC:
			lingering, lingered = false, true
		}
	}
}
