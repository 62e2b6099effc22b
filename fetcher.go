package kyu

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/internal/lifecycle"
)

// fetcher claims the jobs of one queue: up to min(free slots, batch) per
// Claim call, whenever slots are free and the queue may hold claimable
// jobs. It learns that the queue may hold jobs from a full claim, from the
// backend's wake-up signals and from a poll every PollInterval.
type fetcher struct {
	w     *Worker
	queue string
	limit int32 // concurrency
	batch int32 // most jobs per claim

	running atomic.Int32 // slots taken: claimed jobs not yet recorded
	// returned counts jobs of this queue whose handler has returned and
	// whose outcome is on its way to the backend: slots about to free.
	returned atomic.Int32
	freed    chan struct{} // signalled (coalescing) when slots free up
	loop     lifecycle.Loop
}

func newFetcher(w *Worker, queue string, concurrency, batch int) *fetcher {
	return &fetcher{
		w:     w,
		queue: queue,
		limit: int32(concurrency),
		batch: int32(batch),
		freed: make(chan struct{}, 1),
	}
}

// free gives back n slots and wakes the fetcher.
func (f *fetcher) free(n int32) {
	f.running.Add(-n)
	f.wake()
}

// wake signals the fetcher that slots may have freed up.
func (f *fetcher) wake() {
	select {
	case f.freed <- struct{}{}:
	default:
	}
}

func (f *fetcher) run(ctx context.Context) {
	log := f.w.log.With("queue", f.queue)
	var signals <-chan struct{}
	sub, err := f.w.b.Subscribe(ctx, backend.SubscribeParams{Queues: []string{f.queue}})
	if err != nil {
		log.Warn("kyu: no wake-up signals from the backend; polling only", "error", err)
	} else {
		defer sub.Close()
		signals = sub.C
	}
	poll := time.NewTicker(f.w.cfg.PollInterval)
	defer poll.Stop()

	queues := []string{f.queue}
	// more is true while the queue may hold claimable jobs.
	more := true
	for {
		// Claim when slots are free, but not a partial batch while outcomes
		// are being recorded: their slots free up in a moment, and one full
		// claim costs less than several small ones.
		if more {
			if free := f.limit - f.running.Load(); free > 0 && (free >= f.batch || f.returned.Load() == 0) {
				n := min(free, f.batch)
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
		select {
		case <-ctx.Done():
			return
		case <-f.freed:
		case <-signals:
			more = true
		case <-poll.C:
			more = true
		}
	}
}
