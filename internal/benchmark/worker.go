package benchmark

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kyuhq/kyu"
)

// stallTimeout is how long a wait goes without progress before the run is
// given up as stuck (a worker that cannot reach its store, say).
const stallTimeout = 30 * time.Second

// shutdownTimeout bounds a worker's shutdown at the end of a measurement,
// also when the run's context is already done.
const shutdownTimeout = 30 * time.Second

// startWorker starts a worker serving queue with conc handlers running h.
func (r *runner) startWorker(ctx context.Context, queue string, conc int, h kyu.HandlerFunc) (*kyu.Worker, error) {
	mux := kyu.NewMux()
	mux.HandleFunc(JobType, h)
	w, err := kyu.NewWorker(r.b, kyu.WorkerConfig{
		Handler:    mux,
		Queues:     map[string]int{queue: conc},
		ClaimAhead: r.cfg.ClaimAhead,
		Logger:     r.cfg.Logger.With("queue", queue),
	})
	if err != nil {
		return nil, fmt.Errorf("benchmark: new worker: %w", err)
	}
	if err := w.Start(ctx); err != nil {
		return nil, fmt.Errorf("benchmark: start worker: %w", err)
	}
	return w, nil
}

// stopWorker shuts w down gracefully, even when ctx is done, and joins its
// error to err.
func stopWorker(ctx context.Context, w *kyu.Worker, err error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if serr := w.Shutdown(ctx); serr != nil {
		err = errors.Join(err, fmt.Errorf("benchmark: worker shutdown: %w", serr))
	}
	return err
}

// waitCount polls count every interval until it reaches target. It fails
// when ctx ends or when count stays unchanged for stallTimeout.
func waitCount(ctx context.Context, what string, count func() int64, target int64, interval time.Duration) error {
	last, lastChange := count(), time.Now()
	if last >= target {
		return nil
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case now := <-t.C:
			n := count()
			switch {
			case n >= target:
				return nil
			case n != last:
				last, lastChange = n, now
			case now.Sub(lastChange) > stallTimeout:
				return fmt.Errorf("benchmark: %s stuck at %d of %d for %s", what, n, target, stallTimeout)
			}
		}
	}
}

// completedCount reads the worker's count of durably completed jobs.
func completedCount(w *kyu.Worker) func() int64 {
	return func() int64 { return w.Stats().Succeeded }
}
