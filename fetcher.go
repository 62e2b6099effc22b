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

	// idle hands a job to a handler goroutine waiting for one (see
	// Worker.handlerLoop); it is closed when the fetcher's loop ends, which
	// ends the waiting goroutines. goroutines counts the handler
	// goroutines, running a handler or waiting.
	idle       chan *jobRun
	goroutines atomic.Int32

	// order and names are reused by claimOrder; only the loop uses them.
	order []*poolQueue
	names []string
}

// newFetcher returns the fetcher of a pool of queues sharing concurrency
// slots.
func newFetcher(w *Worker, queues []*poolQueue, weighted bool, concurrency, batch int) *fetcher {
	return &fetcher{
		w:        w,
		queues:   queues,
		weighted: weighted,
		rng:      rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		slots:    newSlots(concurrency),
		batch:    int32(batch),
		idle:     make(chan *jobRun),
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

// claimOrder returns the queues one claim of up to n jobs asks for, in the
// order to serve them (strict, or drawn by weight), leaving out the queues
// at their cap, and how many jobs the claim may take so that no queue it
// asks goes over its cap.
func (f *fetcher) claimOrder(n int32) ([]string, int32) {
	f.order = f.order[:0]
	for _, q := range f.queues {
		room := q.room()
		if room == 0 {
			continue
		}
		if room > 0 {
			n = min(n, room)
		}
		f.order = append(f.order, q)
	}
	if f.weighted {
		weightedOrder(f.rng, f.order)
	}
	f.names = f.names[:0]
	for _, q := range f.order {
		f.names = append(f.names, q.name)
	}
	return f.names, n
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
	// Only this loop hands jobs to handler goroutines.
	defer close(f.idle)
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

	// more is true while the queue may hold claimable jobs.
	more := true
	// linger runs while the fetcher waits for more slots before a partial
	// claim; lingered is set when it fired.
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	defer linger.Stop()
	var lingering, lingered bool
	for {
		if more {
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
				queues, n := f.claimOrder(n)
				if len(queues) == 0 {
					more = false // every queue is at its cap
					break
				}
				res, err := f.w.b.Claim(ctx, backend.ClaimParams{
					Queues:   queues,
					Mode:     backend.ClaimStrict,
					Max:      int(n),
					Lease:    f.w.cfg.Lease,
					WorkerID: f.w.cfg.ID,
					Now:      f.w.cfg.Clock.Now(),
				})
				// Claimed jobs are started even if ctx has ended meanwhile:
				// they are ours now, and shutdown will wait for them.
				for _, rec := range res.Jobs {
					q := f.queueOf(rec.Queue)
					f.slots.acquire(q)
					f.w.startJob(f, q, rec)
				}
				switch {
				case err != nil:
					if ctx.Err() != nil {
						return
					}
					log.Error("kyu: claim failed; retrying at the next poll", "error", err)
					more = false
				case len(res.Jobs) < int(n):
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
		if f.slots.setWant(more, f.batch) {
			continue
		}
		var lingerC <-chan time.Time
		if lingering {
			lingerC = linger.C
		}
		select {
		case <-ctx.Done():
			return
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
			more = true
		case <-lingerC:
			lingering, lingered = false, true
		}
	}
}
