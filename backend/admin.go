package backend

import "time"

// CancelParams names a job to cancel at Now.
type CancelParams struct {
	ID  string
	Now time.Time
}

// RetryParams names a failed or cancelled job to run again. The job
// becomes pending with RunAt = Now; its Attempt is kept and MaxAttempts is
// raised to Attempt+1 when needed, so it gets at least one more try; its
// FinishedAt, ExpiresAt, Result, CancelReason and CancelRequested are
// cleared, and a Deadline that is not after Now is cleared (the operator
// asked for the run). A unique key without UniqueFor is taken again; when
// another job holds it, Retry gives an error matching ErrUniqueKeyHeld and
// changes nothing.
type RetryParams struct {
	ID  string
	Now time.Time
}

// RunNowParams names a scheduled or retry job to make pending at once
// (RunAt = Now).
type RunNowParams struct {
	ID  string
	Now time.Time
}

// MaxBatchLimit bounds the Limit of one RetryQueue or Purge call.
const MaxBatchLimit = 10000

// RetryQueueParams retries up to Limit jobs of Queue in State (failed or
// cancelled), oldest first; a job whose unique key is held elsewhere is
// skipped and not counted.
type RetryQueueParams struct {
	Queue string
	State State
	Limit int
	Now   time.Time
}

// PurgeParams deletes up to Limit jobs of Queue in State, oldest first, as
// Delete does. Purging active jobs is refused: cancel them first.
type PurgeParams struct {
	Queue string
	State State
	Limit int
	Now   time.Time
}

// CountResult says how many jobs one bulk operation changed.
type CountResult struct {
	Count int
}

// Check validates a RetryQueue call.
func (p *RetryQueueParams) Check() error {
	if err := checkBulk(p.Queue, p.Limit, p.Now); err != nil {
		return err
	}
	if p.State != StateFailed && p.State != StateCancelled {
		return invalid("state", "only failed or cancelled jobs can be retried, not %q", p.State)
	}
	return nil
}

// Check validates a Purge call.
func (p *PurgeParams) Check() error {
	if err := checkBulk(p.Queue, p.Limit, p.Now); err != nil {
		return err
	}
	switch {
	case !p.State.Valid():
		return invalid("state", "unknown state %q", p.State)
	case p.State == StateActive:
		return invalid("state", "active jobs cannot be purged; cancel them first")
	}
	return nil
}

func checkBulk(queue string, limit int, now time.Time) error {
	if err := CheckNow(now); err != nil {
		return err
	}
	switch {
	case !ValidQueueName(queue):
		return invalid("queue", "%q is not 1-128 characters of [A-Za-z0-9._:-]", queue)
	case limit < 1 || limit > MaxBatchLimit:
		return invalid("limit", "%d is outside [1, %d]", limit, MaxBatchLimit)
	}
	return nil
}
