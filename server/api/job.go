package api

import (
	"encoding/json"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// Job is a job as the API shows it: every field the store keeps. Payload
// and Result appear as JSON when they hold compact JSON, and as base64
// (payload_b64, result_b64) otherwise, so that both travel byte for byte.
type Job struct {
	ID          string            `json:"id"`
	JID         string            `json:"jid,omitempty"`
	Type        string            `json:"type"`
	Queue       string            `json:"queue"`
	Payload     json.RawMessage   `json:"payload,omitempty"`
	PayloadB64  []byte            `json:"payload_b64,omitempty"`
	Title       string            `json:"title,omitempty"`
	Priority    int               `json:"priority"`
	State       backend.State     `json:"state"`
	Attempt     int               `json:"attempt"`
	MaxAttempts int               `json:"max_attempts"`
	RunAt       time.Time         `json:"run_at"`
	Timeout     Duration          `json:"timeout"`
	Deadline    time.Time         `json:"deadline,omitzero"`
	UniqueKey   string            `json:"unique_key,omitempty"`
	UniqueFor   Duration          `json:"unique_for,omitzero"`
	Tags        []string          `json:"tags,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	Retention   backend.Retention `json:"retention"`

	CreatedAt  time.Time `json:"created_at"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`

	WorkerID       string    `json:"worker_id,omitempty"`
	LeaseToken     int64     `json:"lease_token"`
	LeaseExpiresAt time.Time `json:"lease_expires_at,omitzero"`

	Errors          []backend.AttemptError `json:"errors,omitempty"`
	Result          json.RawMessage        `json:"result,omitempty"`
	ResultB64       []byte                 `json:"result_b64,omitempty"`
	CancelReason    string                 `json:"cancel_reason,omitempty"`
	CancelRequested bool                   `json:"cancel_requested,omitempty"`

	Progress    *backend.Progress `json:"progress,omitempty"`
	Logs        []backend.LogLine `json:"logs,omitempty"`
	LogsDropped int               `json:"logs_dropped,omitempty"`

	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// FromJob converts a stored job for the wire.
func FromJob(j *backend.Job) *Job {
	out := &Job{
		ID: j.ID, JID: j.JID, Type: j.Type, Queue: j.Queue, Title: j.Title, Priority: j.Priority,
		State: j.State, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, RunAt: j.RunAt,
		Timeout: Duration(j.Timeout), Deadline: j.Deadline, UniqueKey: j.UniqueKey,
		UniqueFor: Duration(j.UniqueFor), Tags: j.Tags, Metadata: j.Metadata,
		Retention: j.Retention, CreatedAt: j.CreatedAt, StartedAt: j.StartedAt,
		FinishedAt: j.FinishedAt, WorkerID: j.WorkerID, LeaseToken: j.LeaseToken,
		LeaseExpiresAt: j.LeaseExpiresAt, Errors: j.Errors, CancelReason: j.CancelReason,
		CancelRequested: j.CancelRequested, Progress: j.Progress, Logs: j.Logs,
		LogsDropped: j.LogsDropped, ExpiresAt: j.ExpiresAt,
	}
	out.Payload, out.PayloadB64 = splitBytes(j.Payload)
	out.Result, out.ResultB64 = splitBytes(j.Result)
	return out
}

// FromJobs converts stored jobs for the wire.
func FromJobs(js []*backend.Job) []*Job {
	out := make([]*Job, len(js))
	for i, j := range js {
		out[i] = FromJob(j)
	}
	return out
}

// Backend converts a job from the wire back to the stored form. The
// result shares j's payload, result, tags and metadata.
func (j *Job) Backend() *backend.Job {
	return &backend.Job{
		ID: j.ID, JID: j.JID, Type: j.Type, Queue: j.Queue, Payload: joinBytes(j.Payload, j.PayloadB64),
		Title: j.Title, Priority: j.Priority, State: j.State, Attempt: j.Attempt,
		MaxAttempts: j.MaxAttempts, RunAt: j.RunAt, Timeout: time.Duration(j.Timeout),
		Deadline: j.Deadline, UniqueKey: j.UniqueKey, UniqueFor: time.Duration(j.UniqueFor),
		Tags: j.Tags, Metadata: j.Metadata, Retention: j.Retention, CreatedAt: j.CreatedAt,
		StartedAt: j.StartedAt, FinishedAt: j.FinishedAt, WorkerID: j.WorkerID,
		LeaseToken: j.LeaseToken, LeaseExpiresAt: j.LeaseExpiresAt, Errors: j.Errors,
		Result: joinBytes(j.Result, j.ResultB64), CancelReason: j.CancelReason,
		CancelRequested: j.CancelRequested, Progress: j.Progress, Logs: j.Logs,
		LogsDropped: j.LogsDropped, ExpiresAt: j.ExpiresAt,
	}
}

// JobList is a page of GET /api/v1/jobs.
type JobList struct {
	Jobs       []*Job `json:"jobs"`
	NextCursor string `json:"next_cursor,omitempty"`
}
