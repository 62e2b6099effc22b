package pebble

import (
	"context"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// Cancel cancels a waiting job at once (reason "requested"), records the
// request on an active one (CancelRequested), and refuses a final one with
// a *backend.StateError.
func (s *store) Cancel(ctx context.Context, p backend.CancelParams) (*backend.Job, error) {
	return s.jobOp(ctx, p.ID, func(id jobID, j *backend.Job, sd side) error {
		switch {
		case j.State.Final():
			return &backend.StateError{Op: "cancel", ID: j.ID, State: j.State}
		case j.State == backend.StateActive:
			if !j.CancelRequested {
				// j is the lease's record: the change is seen by the
				// heartbeats and outcomes that follow.
				j.CancelRequested = true
				s.put(id, j, sd)
			}
		default:
			j.CancelReason = backend.CancelReasonRequested
			s.toFinal(id, j, sd, backend.StateCancelled, p.Now)
		}
		return nil
	})
}

// cancelRequested ends a job whose cancel was requested, at the end of its
// attempt: it becomes cancelled (reason "requested") instead of whatever
// the attempt's outcome would have made it. Callers record the attempt
// (result, error) first. It reports whether it ended the job; mu must be
// held.
func (s *store) cancelRequested(id jobID, j *backend.Job, sd side, now time.Time) bool {
	if !j.CancelRequested {
		return false
	}
	j.CancelReason = backend.CancelReasonRequested
	s.toFinal(id, j, sd, backend.StateCancelled, now)
	return true
}
