package backend

import "time"

// QueueRetention overrides the default retention of one queue's jobs, per
// final state. RetainDefault leaves that state's default alone; a job's own
// Retention, when not RetainDefault, wins over both.
type QueueRetention struct {
	Completed Retention `json:"completed"`
	Failed    Retention `json:"failed"`
	Cancelled Retention `json:"cancelled"`
}

// For returns the override for the final state s.
func (q QueueRetention) For(s State) Retention {
	switch s {
	case StateCompleted:
		return q.Completed
	case StateFailed:
		return q.Failed
	case StateCancelled:
		return q.Cancelled
	}
	return RetainDefault
}

// Valid reports whether every override is a defined Retention.
func (q QueueRetention) Valid() bool {
	return q.Completed.Valid() && q.Failed.Valid() && q.Cancelled.Valid()
}

// QueueSettings are a queue's persistent settings. The zero value is a
// queue that runs, with the default retention.
type QueueSettings struct {
	// Paused: Claim hands out nothing from the queue; jobs are still
	// enqueued and promoted, and active ones finish. Resuming signals
	// subscribers.
	Paused    bool           `json:"paused"`
	Retention QueueRetention `json:"retention"`
}

// UpdateQueueParams changes the settings of Queue: each non-nil field
// replaces its setting, the others are kept.
type UpdateQueueParams struct {
	Queue     string
	Paused    *bool
	Retention *QueueRetention
	Now       time.Time
}

// Check validates an update.
func (p *UpdateQueueParams) Check() error {
	if err := CheckNow(p.Now); err != nil {
		return err
	}
	switch {
	case !ValidQueueName(p.Queue):
		return invalid("queue", "%q is not 1-128 characters of [A-Za-z0-9._:-]", p.Queue)
	case p.Retention != nil && !p.Retention.Valid():
		return invalid("retention", "unknown retention value")
	}
	return nil
}

// ResultGrace is how long a job with RetainNone that completed with a
// result is kept anyway, so that a caller waiting for it can read it.
const ResultGrace = time.Minute

// Expiry decides what retention does with a job that becomes final in
// state s at now: delete it in the same step (deleteNow), keep it until at,
// or keep it forever (at zero, deleteNow false). The job's own retention
// wins, then the queue's override for s, then the default for s. Every
// store calls it at the moment a job becomes final and stores at as
// Job.ExpiresAt, so later changes of a queue's override apply to jobs
// that finish later.
func Expiry(job Retention, queue QueueRetention, s State, now time.Time, hasResult bool) (at time.Time, deleteNow bool) {
	r := job
	if r == RetainDefault {
		r = queue.For(s)
	}
	if r == RetainNone {
		if s == StateCompleted && hasResult {
			return now.Add(ResultGrace), false
		}
		return time.Time{}, true
	}
	keep, forever := r.Keep(s)
	if forever {
		return time.Time{}, false
	}
	at = now.Add(keep)
	if !InTimeRange(at) {
		return time.Time{}, false
	}
	return at, false
}
