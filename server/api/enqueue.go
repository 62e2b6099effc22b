package api

import (
	"encoding/json"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// NewJob is one job in the body of POST /api/v1/jobs. Payload is any JSON
// value, stored as its exact bytes; PayloadB64 carries binary payloads.
// Delay and RunAt are two ways to say when it may run (not both).
type NewJob struct {
	Type        string            `json:"type"`
	Queue       string            `json:"queue,omitempty"`
	Payload     json.RawMessage   `json:"payload,omitempty"`
	PayloadB64  []byte            `json:"payload_b64,omitempty"`
	Title       string            `json:"title,omitempty"`
	Priority    int               `json:"priority,omitempty"`
	Delay       Duration          `json:"delay,omitzero"`
	RunAt       time.Time         `json:"run_at,omitzero"`
	MaxAttempts int               `json:"max_attempts,omitempty"`
	Timeout     Duration          `json:"timeout,omitzero"`
	Deadline    time.Time         `json:"deadline,omitzero"`
	UniqueKey   string            `json:"unique_key,omitempty"`
	UniqueFor   Duration          `json:"unique_for,omitzero"`
	JID         string            `json:"jid,omitempty"`
	Tags        []string          `json:"tags,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	Retention   backend.Retention `json:"retention,omitzero"`
}

// FromNewJob converts a job to enqueue for the wire, carrying its payload
// as JSON when it is compact JSON and as base64 otherwise.
func FromNewJob(j backend.NewJob) NewJob {
	out := NewJob{
		Type: j.Type, Queue: j.Queue, Title: j.Title, Priority: j.Priority, RunAt: j.RunAt,
		MaxAttempts: j.MaxAttempts, Timeout: Duration(j.Timeout), Deadline: j.Deadline,
		UniqueKey: j.UniqueKey, UniqueFor: Duration(j.UniqueFor), JID: j.JID, Tags: j.Tags,
		Metadata: j.Metadata, Retention: j.Retention,
	}
	out.Payload, out.PayloadB64 = splitBytes(j.Payload)
	return out
}

// Backend converts the job for the store at now (the base of Delay). It
// refuses what the store's checks cannot see: both payload forms, both
// delay and run_at, a negative delay. The result shares j's payload,
// tags and metadata: no copy of a payload of the largest size is made.
func (j NewJob) Backend(index int, now time.Time) (backend.NewJob, error) {
	switch {
	case len(j.Payload) > 0 && len(j.PayloadB64) > 0 && string(j.Payload) != "null":
		return backend.NewJob{}, &backend.ValidationError{Index: index, Field: "payload_b64", Reason: "give payload or payload_b64, not both"}
	case j.Delay != 0 && !j.RunAt.IsZero():
		return backend.NewJob{}, &backend.ValidationError{Index: index, Field: "delay", Reason: "give delay or run_at, not both"}
	case j.Delay < 0:
		return backend.NewJob{}, &backend.ValidationError{Index: index, Field: "delay", Reason: "must not be negative"}
	}
	runAt := j.RunAt
	if j.Delay > 0 {
		runAt = now.Add(time.Duration(j.Delay))
	}
	return backend.NewJob{
		Type: j.Type, Queue: j.Queue, Payload: joinBytes(j.Payload, j.PayloadB64), Title: j.Title,
		Priority: j.Priority, RunAt: runAt, MaxAttempts: j.MaxAttempts,
		Timeout: time.Duration(j.Timeout), Deadline: j.Deadline, UniqueKey: j.UniqueKey,
		UniqueFor: time.Duration(j.UniqueFor), JID: j.JID, Tags: j.Tags, Metadata: j.Metadata,
		Retention: j.Retention,
	}, nil
}

// Enqueued is the answer for one enqueued job. For a duplicate, ID and
// State are the holder's and Duplicate is set.
type Enqueued struct {
	ID        string        `json:"id"`
	State     backend.State `json:"state"`
	Duplicate bool          `json:"duplicate,omitempty"`
}
