package kyu

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// State is where a job is in its life; see backend.State for the diagram.
type State = backend.State

// The states of a job.
const (
	StateScheduled = backend.StateScheduled
	StatePending   = backend.StatePending
	StateActive    = backend.StateActive
	StateRetry     = backend.StateRetry
	StateCompleted = backend.StateCompleted
	StateFailed    = backend.StateFailed
	StateCancelled = backend.StateCancelled
)

// AttemptError records how one unsuccessful attempt ended.
type AttemptError = backend.AttemptError

// Retention is how long a finished job is kept; see backend.Retention.
type Retention = backend.Retention

// Retention values beside a plain duration (RetainFor).
const (
	RetainDefault = backend.RetainDefault
	RetainNone    = backend.RetainNone
	RetainForever = backend.RetainForever
)

// JobProgress is the latest progress a handler reported for a job (see
// Progress): a percentage, a message and when it was recorded.
type JobProgress = backend.Progress

// LogLine is one line a handler logged for a job, with its time.
type LogLine = backend.LogLine

// RetainFor keeps a finished job for d.
func RetainFor(d time.Duration) Retention { return backend.RetainFor(d) }

// Job is a job as a handler or a Client.Get caller sees it.
type Job struct {
	ID          string
	Type        string
	Queue       string
	Payload     []byte
	Title       string
	Priority    int
	State       State
	Attempt     int
	MaxAttempts int
	RunAt       time.Time
	Timeout     time.Duration
	Deadline    time.Time
	UniqueKey   string
	UniqueFor   time.Duration
	// JID is the id the producer gave the job, if any (EnqueueOptions.JID).
	JID        string
	Tags       []string
	Metadata   map[string]string
	Retention  Retention
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	WorkerID   string
	// Errors holds the error of every unsuccessful attempt, oldest first.
	Errors       []AttemptError
	Result       []byte
	CancelReason string
	// CancelRequested is set on an active job someone asked to cancel
	// (Client.Cancel): it ends cancelled however its attempt ends.
	CancelRequested bool

	// Progress is the latest progress reported by a handler (nil if
	// none); Logs holds the lines it logged, at most the worker's cap (the
	// first ones), and LogsDropped counts the lines past the cap. Jobs in
	// a List page carry no Logs (Get has them).
	Progress    *JobProgress
	Logs        []LogLine
	LogsDropped int

	// ExpiresAt is when retention will delete this finished job; zero
	// while the job is not final, or when it is kept forever.
	ExpiresAt time.Time

	// run is set while a Worker runs the job; it carries the handler's
	// result and lease back to the worker.
	run *jobRun
}

// UnmarshalPayload decodes the JSON payload into v.
func (j *Job) UnmarshalPayload(v any) error {
	if err := json.Unmarshal(j.Payload, v); err != nil {
		return fmt.Errorf("kyu: job %s payload: %w", j.ID, err)
	}
	return nil
}

// SetResult stores b as the job's result when the handler succeeds. Only
// the Job a Worker hands its handler can carry a result: on any other Job
// (one from Client.Get, or built by hand) it returns an error matching
// ErrNotInHandler and changes nothing.
func (j *Job) SetResult(b []byte) error {
	if j.run == nil {
		return fmt.Errorf("kyu: set result of job %s: %w", j.ID, ErrNotInHandler)
	}
	j.run.setResult(b)
	return nil
}

// SetResultJSON stores v, encoded as JSON, as the job's result, as
// SetResult does. The JSON is stored as written: <, > and & are not
// escaped.
func (j *Job) SetResultJSON(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("kyu: encode result: %w", err)
	}
	return j.SetResult(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// jobFromRecord copies a stored job into the public type; the Job owns
// its slices and map.
func jobFromRecord(r *backend.Job) *Job {
	j := new(Job)
	fillJob(j, r.Clone())
	return j
}

// fillJob sets every public field of j from r, sharing r's slices and map:
// the one place that maps backend.Job onto Job. Field by field, so that
// the copy goes straight into j (a composite literal is built aside and
// then copied: twice the stores).
func fillJob(j *Job, r *backend.Job) {
	j.ID, j.Type, j.Queue, j.Payload, j.Title = r.ID, r.Type, r.Queue, r.Payload, r.Title
	j.Priority, j.State, j.Attempt, j.MaxAttempts = r.Priority, r.State, r.Attempt, r.MaxAttempts
	j.RunAt, j.Timeout, j.Deadline = r.RunAt, r.Timeout, r.Deadline
	j.UniqueKey, j.UniqueFor, j.JID, j.Tags, j.Metadata = r.UniqueKey, r.UniqueFor, r.JID, r.Tags, r.Metadata
	j.Retention, j.CreatedAt, j.StartedAt = r.Retention, r.CreatedAt, r.StartedAt
	j.FinishedAt, j.WorkerID, j.Errors = r.FinishedAt, r.WorkerID, r.Errors
	j.Result, j.CancelReason, j.CancelRequested = r.Result, r.CancelReason, r.CancelRequested
	j.Progress, j.Logs, j.LogsDropped, j.ExpiresAt = r.Progress, r.Logs, r.LogsDropped, r.ExpiresAt
}
