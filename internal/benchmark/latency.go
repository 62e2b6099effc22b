package benchmark

import (
	"context"
	"fmt"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/internal/cpupressure"
)

// latency measures enqueue-to-start on an idle worker with conc handlers
// on queue: one job at a time, from before the Enqueue call to the start of
// its handler, then a wait until the job's completion is stored and
// cfg.LatencyGap more, so that the worker is waiting for work again. One
// unrecorded sample warms the path up first.
func (r *runner) latency(ctx context.Context, queue string, conc int) (l Latency, err error) {
	started := make(chan time.Time, 1)
	handler := func(context.Context, *kyu.Job) error {
		select {
		case started <- time.Now():
		default: // a redelivered job; the sample already has its time
		}
		return nil
	}
	w, err := r.startWorker(ctx, queue, conc, handler)
	if err != nil {
		return Latency{}, err
	}
	defer func() { err = stopWorker(ctx, w, err) }()

	completed := completedCount(w)
	pressure, began := cpupressure.Read(), time.Now()
	samples := make([]time.Duration, 0, r.cfg.LatencySamples)
	gap := time.NewTimer(0)
	defer gap.Stop()
	for i := range r.cfg.LatencySamples + 1 {
		select {
		case <-gap.C:
		case <-ctx.Done():
			return Latency{}, context.Cause(ctx)
		}
		begin := time.Now()
		if _, err := r.client.Enqueue(ctx, JobType, r.payload, kyu.EnqueueOptions{Queue: queue}); err != nil {
			return Latency{}, fmt.Errorf("benchmark: latency sample %d: %w", i, err)
		}
		var at time.Time
		select {
		case at = <-started:
		case <-ctx.Done():
			return Latency{}, context.Cause(ctx)
		case <-time.After(stallTimeout):
			return Latency{}, fmt.Errorf("benchmark: latency sample %d: the job did not start within %s", i, stallTimeout)
		}
		if i > 0 {
			samples = append(samples, at.Sub(begin))
		}
		if err := waitCount(ctx, "completed jobs", completed, int64(i+1), completionPoll); err != nil {
			return Latency{}, fmt.Errorf("benchmark: latency sample %d: %w", i, err)
		}
		gap.Reset(r.cfg.LatencyGap)
	}
	l = newLatency(samples)
	l.CPUWait = pressure.Share(time.Since(began))
	return l, nil
}
