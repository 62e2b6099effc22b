package main

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// params are the measurements' sizes.
type params struct {
	jobs      int           // jobs per throughput figure
	batch     int           // jobs per batch call
	drainConc int           // handlers for the drain
	idleConc  int           // handlers for the idle latency
	samples   int           // idle latency samples
	gap       time.Duration // idle time before each latency sample
	stall     time.Duration // how long a wait goes without progress
	poll      time.Duration // how often a store's counts are read
}

// measure runs the four measurements on s, each on an emptied store: one
// producer enqueuing one job per call, then the drain of those jobs; the
// batch enqueue; the idle latency.
func measure(ctx context.Context, s system, p params, r *result) error {
	body := payload(100)
	n := int64(p.jobs)

	if err := s.reset(ctx); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	begin := time.Now()
	for i := range p.jobs {
		if err := s.enqueueOne(ctx, body); err != nil {
			return fmt.Errorf("single enqueue %d: %w", i, err)
		}
	}
	r.SinglePerSec = perSec(p.jobs, time.Since(begin))
	if err := expectPending(ctx, s, n, "single enqueue"); err != nil {
		return err
	}

	if err := drain(ctx, s, p, r); err != nil {
		return fmt.Errorf("drain: %w", err)
	}

	if err := s.reset(ctx); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	batch := make([][]byte, p.batch)
	for i := range batch {
		batch[i] = body
	}
	begin = time.Now()
	var batchErr error
	for left := p.jobs; left > 0 && batchErr == nil; left -= p.batch {
		batchErr = s.enqueueBatch(ctx, batch[:min(left, p.batch)])
	}
	switch {
	case batchErr == errNoBatch:
	case batchErr != nil:
		return fmt.Errorf("batch enqueue: %w", batchErr)
	default:
		v := perSec(p.jobs, time.Since(begin))
		r.BatchPerSec = &v
		if err := expectPending(ctx, s, n, "batch enqueue"); err != nil {
			return err
		}
	}

	if err := s.reset(ctx); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	if err := latency(ctx, s, p, body, r); err != nil {
		return fmt.Errorf("idle latency: %w", err)
	}
	return nil
}

// expectPending checks that the store holds exactly n waiting jobs.
func expectPending(ctx context.Context, s system, n int64, what string) error {
	pending, _, err := s.counts(ctx)
	if err != nil {
		return fmt.Errorf("%s: count: %w", what, err)
	}
	if pending != n {
		return fmt.Errorf("%s: the store holds %d waiting jobs, not %d", what, pending, n)
	}
	return nil
}

// drain starts p.drainConc handlers on the store's p.jobs waiting jobs and
// times them from the start until the handlers have run every job and the
// store counts every one completed.
func drain(ctx context.Context, s system, p params, r *result) (err error) {
	n := int64(p.jobs)
	var ran atomic.Int64
	allRan := make(chan struct{})
	onJob := func() {
		if ran.Add(1) == n {
			close(allRan)
		}
	}
	begin := time.Now()
	stop, err := s.work(ctx, p.drainConc, onJob)
	if err != nil {
		return err
	}
	defer func() { err = stopWorkers(ctx, stop, err) }()
	if err := waitClosed(ctx, "handlers", allRan, ran.Load, n, p.stall); err != nil {
		return err
	}
	if err := waitFor(ctx, "completed jobs", completed(s), n, p.poll, p.stall); err != nil {
		return err
	}
	r.DrainPerSec = perSec(p.jobs, time.Since(begin))
	if err := stopWorkers(ctx, stop, nil); err != nil {
		return err
	}
	stop = func(context.Context) error { return nil }
	pending, done, err := s.counts(ctx)
	if err != nil {
		return fmt.Errorf("count: %w", err)
	}
	r.Ran, r.Completed = ran.Load(), done
	if pending != 0 || done != n || r.Ran < n {
		return fmt.Errorf("after the drain: %d handler calls, %d completed, %d waiting, for %d jobs", r.Ran, done, pending, n)
	}
	return nil
}

// latency measures enqueue-to-start on idle handlers: one job at a time,
// from before the enqueue call to the start of its handler, then a wait
// until the store counts it completed and p.gap more. One unrecorded
// sample warms the path up first.
func latency(ctx context.Context, s system, p params, body []byte, r *result) (err error) {
	started := make(chan time.Time, 1)
	onJob := func() {
		select {
		case started <- time.Now():
		default: // a job run twice; its sample has its time already
		}
	}
	stop, err := s.work(ctx, p.idleConc, onJob)
	if err != nil {
		return err
	}
	defer func() { err = stopWorkers(ctx, stop, err) }()

	samples := make([]time.Duration, 0, p.samples)
	for i := range p.samples + 1 {
		select {
		case <-time.After(p.gap):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		begin := time.Now()
		if err := s.enqueueOne(ctx, body); err != nil {
			return fmt.Errorf("sample %d: %w", i, err)
		}
		select {
		case at := <-started:
			if i > 0 {
				samples = append(samples, at.Sub(begin))
			}
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(p.stall):
			return fmt.Errorf("sample %d: the job did not start within %s", i, p.stall)
		}
		if err := waitFor(ctx, "completed jobs", completed(s), int64(i+1), p.poll, p.stall); err != nil {
			return fmt.Errorf("sample %d: %w", i, err)
		}
	}
	slices.Sort(samples)
	r.P50ms = ms(quantile(samples, 0.50))
	r.P99ms = ms(quantile(samples, 0.99))
	r.Samples = len(samples)
	return nil
}

// stopWorkers stops handlers, even when ctx is done, and joins its error
// to err.
func stopWorkers(ctx context.Context, stop func(context.Context) error, err error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if serr := stop(ctx); serr != nil && err == nil {
		err = fmt.Errorf("stop handlers: %w", serr)
	}
	return err
}

// completed reads the store's count of completed jobs.
func completed(s system) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		_, c, err := s.counts(ctx)
		return c, err
	}
}

func perSec(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// quantile returns the q-quantile of sorted samples (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
