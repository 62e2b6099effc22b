package kyu

import (
	"time"

	"github.com/kyuhq/kyu/backend"
)

// EnqueueOptions are the per-job choices of a producer. The zero value
// enqueues into the "default" queue, priority 0, to run at once, with 25
// attempts, a 30-minute timeout and the default retention.
type EnqueueOptions struct {
	// Queue defaults to "default"; names are 1-128 of [A-Za-z0-9._:-].
	Queue string
	// Title is shown in lists.
	Title string
	// Priority in [-100, 100]; higher runs first.
	Priority int
	// Delay runs the job this long from now; RunAt, if set, wins. A
	// negative Delay is refused with a *ValidationError naming "delay".
	Delay time.Duration
	RunAt time.Time
	// MaxAttempts defaults to 25.
	MaxAttempts int
	// Timeout bounds one attempt; the handler's context ends then. Default 30m.
	Timeout time.Duration
	// Deadline discards the job (cancelled, reason "deadline") if it has not
	// started by then.
	Deadline time.Time
	// UniqueKey refuses a duplicate in the same queue until this job is
	// final, or for exactly UniqueFor from enqueue when that is set.
	UniqueKey string
	UniqueFor time.Duration
	// JID is a second id of the caller's choosing (Faktory's jid), unique
	// in the whole store while the job exists: a job whose JID is taken is
	// a duplicate of the job holding it. Client.GetByJID finds the job.
	JID      string
	Tags     []string
	Metadata map[string]string
	// Retention: how long the finished job is kept. Zero is the default.
	Retention Retention
}

// newJob maps a producer's options onto the job the store writes, Delay
// counted from now: the one place that does. The error's Index is -1.
func (o EnqueueOptions) newJob(jobType string, payload []byte, now time.Time) (backend.NewJob, *ValidationError) {
	if o.Delay < 0 {
		return backend.NewJob{}, &ValidationError{Index: -1, Field: "delay", Reason: "must not be negative"}
	}
	runAt := o.RunAt
	if runAt.IsZero() && o.Delay > 0 {
		runAt = now.Add(o.Delay)
	}
	return backend.NewJob{
		Type: jobType, Queue: o.Queue, Payload: payload, Title: o.Title,
		Priority: o.Priority, RunAt: runAt, MaxAttempts: o.MaxAttempts,
		Timeout: o.Timeout, Deadline: o.Deadline, UniqueKey: o.UniqueKey,
		UniqueFor: o.UniqueFor, JID: o.JID, Tags: o.Tags, Metadata: o.Metadata, Retention: o.Retention,
	}, nil
}
