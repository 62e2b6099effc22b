package benchmark

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/internal/cpupressure"
)

// completionPoll is how often the drain checks the worker's completed count
// once every handler has run; it bounds the error of the end time.
const completionPoll = 100 * time.Microsecond

// drain starts a worker with conc handlers on queue, which holds cfg.Jobs
// pending jobs, and times it until every job has run and the worker has
// recorded every completion in the store.
func (r *runner) drain(ctx context.Context, queue string, conc int) (t Throughput, err error) {
	n := int64(r.cfg.Jobs)
	var ran atomic.Int64
	allRan := make(chan struct{})
	handler := func(context.Context, *kyu.Job) error {
		if ran.Add(1) == n {
			close(allRan)
		}
		return nil
	}

	pressure := cpupressure.Read()
	start := time.Now()
	w, err := r.startWorker(ctx, queue, conc, handler)
	if err != nil {
		return Throughput{}, err
	}
	defer func() { err = stopWorker(ctx, w, err) }()

	// The handlers' counter says when all jobs have run without polling;
	// the worker's count then says when their completions are stored.
	if err := waitRan(ctx, allRan, ran.Load, n); err != nil {
		return Throughput{}, fmt.Errorf("benchmark: drain %s: %w", queue, err)
	}
	if err := waitCount(ctx, "completed jobs", completedCount(w), n, completionPoll); err != nil {
		return Throughput{}, fmt.Errorf("benchmark: drain %s: %w", queue, err)
	}
	elapsed := time.Since(start)
	t = newThroughput(int(n), 0, elapsed)
	t.CPUWait = pressure.Share(elapsed)
	return t, nil
}

// waitRan waits for done to close, failing when ctx ends or when ran stops
// moving for stallTimeout.
func waitRan(ctx context.Context, done <-chan struct{}, ran func() int64, n int64) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, lastChange := ran(), time.Now()
	for {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		case now := <-tick.C:
			if c := ran(); c != last {
				last, lastChange = c, now
			} else if now.Sub(lastChange) > stallTimeout {
				return fmt.Errorf("handlers stuck at %d of %d jobs for %s", c, n, stallTimeout)
			}
		}
	}
}
