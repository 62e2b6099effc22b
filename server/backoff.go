package server

import (
	"context"
	"errors"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// applyBackoff sets RetryAt on the items that retry (neither Final nor
// Cancel) and name no retry_at: now plus Config.Backoff of the job's
// attempt, so that a worker that fails without choosing a time does not
// burn its attempts in a tight loop. An item whose job cannot be read is
// left as it is: Fail then reports its error.
func (s *Server) applyBackoff(ctx context.Context, items []backend.FailItem, now time.Time) {
	for i := range items {
		it := &items[i]
		if !it.RetryAt.IsZero() || it.Final || it.Cancel {
			continue
		}
		j, err := s.b.Get(ctx, backend.GetParams{ID: it.Lease.JobID})
		if err != nil {
			continue
		}
		it.RetryAt = retryTime(now, s.cfg.Backoff(j.Attempt, errors.New(it.Message)))
	}
}

// retryTime is now plus d, or now when d is not positive, and never past
// the last time a store holds.
func retryTime(now time.Time, d time.Duration) time.Time {
	last := backend.MaxTime().Add(-time.Nanosecond)
	switch {
	case d <= 0:
		return now
	case d >= last.Sub(now):
		return last
	}
	return now.Add(d)
}
