package daemon

import (
	"encoding/json"
	"time"

	"github.com/kyuhq/kyu"
)

// jobInput is the job as a child reads it on stdin: one JSON object, then
// EOF. A payload that is JSON goes as it is under "payload"; any other
// goes base64-encoded under "payload_b64" (and "payload" is absent).
type jobInput struct {
	ID          string            `json:"id"`
	Type        string            `json:"type"`
	Queue       string            `json:"queue"`
	Payload     json.RawMessage   `json:"payload,omitempty"`
	PayloadB64  []byte            `json:"payload_b64,omitempty"`
	Attempt     int               `json:"attempt"`
	MaxAttempts int               `json:"max_attempts"`
	CreatedAt   time.Time         `json:"created_at"`
	Deadline    *time.Time        `json:"deadline"`
	Metadata    map[string]string `json:"metadata"`
	Title       string            `json:"title,omitempty"`
	Priority    int               `json:"priority"`
	Tags        []string          `json:"tags,omitempty"`
	// TimeoutMS is the job's own timeout in milliseconds, 0 for none.
	TimeoutMS int64 `json:"timeout_ms"`
}

// encodeJob is the line a child reads on stdin, with its newline.
func encodeJob(j *kyu.Job) ([]byte, error) {
	in := jobInput{
		ID: j.ID, Type: j.Type, Queue: j.Queue,
		Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, CreatedAt: j.CreatedAt,
		Metadata: j.Metadata, Title: j.Title, Priority: j.Priority, Tags: j.Tags,
		TimeoutMS: j.Timeout.Milliseconds(),
	}
	if in.Metadata == nil {
		in.Metadata = map[string]string{}
	}
	if !j.Deadline.IsZero() {
		d := j.Deadline
		in.Deadline = &d
	}
	switch {
	case len(j.Payload) == 0:
		in.Payload = json.RawMessage("null")
	case json.Valid(j.Payload):
		in.Payload = j.Payload
	default:
		in.PayloadB64 = j.Payload
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
