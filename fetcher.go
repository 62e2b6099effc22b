package kyu

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/internal/lifecycle"
)

// earlyFactor is how many times its concurrency a queue may have in jobs
// whose handler has returned and whose slot was freed before their outcome
// was recorded (see freeEarly). At one, a drain of no-op handlers waited for
// each batch's outcomes to be recorded before the next claim could take
// their slots; at two, the claim and the recording of the batch before
// overlap (PostgreSQL and Redis drains with 50 handlers about 10-20 %
// faster, docs/benchmarks.md).
const earlyFactor = 2

// fetcherLinger bounds how long a fetcher with some free slots waits for
// running handlers to free more before it claims a partial batch.
const fetcherLinger = 100 * time.Microsecond

// fetcher claims the jobs of one queue: up to min(free slots, batch) per
// Claim call, whenever slots are free and the queue may hold claimable
// jobs. It learns that the queue may hold jobs from a full claim, from the
// backend's wake-up signals (see wakeups) and from a poll every
// PollInterval.
type fetcher struct {
	w     *Worker
	queue string
	limit int32 // concurrency
	batch int32 // most jobs per claim

	// running counts the slots taken: jobs whose handler runs, and jobs
	// whose handler has returned but whose slot is held until their
	// outcome is recorded (see freeEarly).
	running atomic.Int32
	// held counts the jobs among running whose handler has returned and
	// whose slot is held until their outcome is recorded. It is its own
	// counter, not a difference of two, so a reader never sees a transient
	// value: it is raised before the outcome is queued and lowered, in
	// finish, before the slot is freed and the fetcher woken.
	held atomic.Int32
	// early counts the jobs whose slot was freed when their handler
	// returned and whose outcome is not yet recorded; it never exceeds
	// earlyFactor*limit, so a queue holds at most (1+earlyFactor) times its
	// concurrency in leases.
	early atomic.Int32
	freed chan struct{} // signalled (coalescing) when slots free up
	// want is how many free slots make a free worth waking the fetcher
	// for: one while none is free (to begin lingering), a full batch while
	// it lingers, none (more than limit) while the queue is thought empty.
	// Handlers return one by one, and waking the fetcher for each would
	// cost a wake-up per job for nothing.
	want atomic.Int32
	loop lifecycle.Loop

	// idle hands a job to a handler goroutine waiting for one (see
	// Worker.handlerLoop); it is closed when the fetcher's loop ends, which
	// ends the waiting goroutines. goroutines counts the handler
	// goroutines, running a handler or waiting.
	idle       chan *jobRun
	goroutines atomic.Int32
}

func newFetcher(w *Worker, queue string, concurrency, batch int) *fetcher {
	f := &fetcher{
		w:     w,
		queue: queue,
		limit: int32(concurrency),
		batch: int32(batch),
		freed: make(chan struct{}, 1),
		idle:  make(chan *jobRun),
	}
	f.want.Store(1)
	return f
}

// free gives back n slots, and wakes the fetcher when it wants that many
// free slots.
func (f *fetcher) free(n int32) {
	if f.limit-f.running.Add(-n) >= f.want.Load() {
		f.wake()
	}
}

// freeEarly frees the slot of a job whose handler has returned and whose
// outcome is about to be queued to the completer, so that the next claim
// need not wait for the outcome to be recorded: the claim and the
// completions then share a commit. It does so unless earlyFactor*limit
// jobs with early-freed slots are already unrecorded, in which case the slot stays
// taken until the outcome is recorded; it reports whether it freed the
// slot.
func (f *fetcher) freeEarly() bool {
	for {
		n := f.early.Load()
		if n >= earlyFactor*f.limit {
			return false
		}
		if f.early.CompareAndSwap(n, n+1) {
			break
		}
	}
	f.free(1)
	return true
}

// wake signals the fetcher that slots may have freed up.
func (f *fetcher) wake() {
	select {
	case f.freed <- struct{}{}:
	default:
	}
}

func (f *fetcher) run(ctx context.Context) {
	// Only this loop hands jobs to handler goroutines.
	defer close(f.idle)
	log := f.w.log.With("queue", f.queue)
	wakeups := newWakeups(f.w.b, f.queue, log)
	wakeups.start(ctx)
	defer wakeups.close()
	poll := time.NewTicker(f.w.cfg.PollInterval)
	defer poll.Stop()

	queues := []string{f.queue}
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
			n, wait := f.claimSize(lingered)
			switch {
			case wait && !lingering:
				linger.Reset(fetcherLinger)
				lingering = true
			case n > 0:
				if lingering {
					linger.Stop()
				}
				lingering, lingered = false, false
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
					f.running.Add(1)
					f.w.startJob(f, rec)
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
		want := f.limit + 1
		if more {
			want = f.batch
			if f.running.Load() >= f.limit {
				want = 1
			}
		}
		f.want.Store(want)
		if f.limit-f.running.Load() >= want {
			continue
		}
		var lingerC <-chan time.Time
		if lingering {
			lingerC = linger.C
		}
		select {
		case <-ctx.Done():
			return
		case <-f.freed:
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

// claimSize returns how many jobs to claim now: none when no slot is
// free. A partial batch waits (wait is true) while slots are about to free
// up, since one full claim costs one commit and several small ones cost
// several: while outcomes that hold their slots are being recorded, and,
// for at most fetcherLinger (lingered reports that it has passed), while
// handlers are still running.
func (f *fetcher) claimSize(lingered bool) (n int32, wait bool) {
	free := f.limit - f.running.Load()
	switch {
	case free <= 0:
		return 0, false
	case free >= f.batch:
		return f.batch, false
	}
	if f.held.Load() > 0 {
		return 0, false // the completer frees them and wakes us
	}
	// Every taken slot is a running handler now.
	if free < f.limit && !lingered {
		return 0, true
	}
	return free, false
}
