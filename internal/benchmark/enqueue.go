package benchmark

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/internal/cpupressure"
)

// enqueue writes cfg.Jobs jobs into queue, perCall jobs per call (Enqueue
// when perCall is 1, EnqueueMany otherwise), from cfg.Producers goroutines
// taking calls from a shared counter, and times it.
func (r *runner) enqueue(ctx context.Context, queue string, perCall int) (Throughput, error) {
	jobs := r.cfg.Jobs
	calls := (jobs + perCall - 1) / perCall
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var next atomic.Int64
	var wg sync.WaitGroup
	opts := kyu.EnqueueOptions{Queue: queue}
	pressure := cpupressure.Read()
	start := time.Now()
	for range min(r.cfg.Producers, calls) {
		wg.Go(func() {
			batch := make([]kyu.JobSpec, 0, perCall)
			for ctx.Err() == nil {
				call := int(next.Add(1)) - 1
				if call >= calls {
					return
				}
				var err error
				if perCall == 1 {
					_, err = r.client.Enqueue(ctx, JobType, r.payload, opts)
				} else {
					n := min(perCall, jobs-call*perCall)
					batch = batch[:0]
					for range n {
						batch = append(batch, kyu.JobSpec{Type: JobType, Payload: r.payload, EnqueueOptions: opts})
					}
					_, err = r.client.EnqueueMany(ctx, batch)
				}
				if err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return Throughput{}, fmt.Errorf("benchmark: enqueue into %s: %w", queue, err)
	}
	t := newThroughput(jobs, calls, elapsed)
	t.CPUWait = pressure.Share(elapsed)
	return t, nil
}
