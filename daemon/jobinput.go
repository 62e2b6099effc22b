package daemon

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
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
	if b, ok := appendJob(make([]byte, 0, 256+len(j.Payload)), j); ok {
		return b, nil
	}
	return marshalJob(j)
}

// appendJob appends the line of encodeJob to b, as marshalJob writes it,
// without reflection: it is written once per job, and json.Marshal was
// a tenth of the prefork runner's CPU time per job. It reports false,
// leaving the job to marshalJob, for what it does not write the same
// way: a string or payload with a byte to escape or compact, a payload
// that is not JSON, a time json refuses.
func appendJob(b []byte, j *kyu.Job) ([]byte, bool) {
	if !plainJSON(j.Payload) || !json.Valid(j.Payload) && len(j.Payload) > 0 {
		return b, false
	}
	ok := true
	str := func(s string) {
		if !plainString(s) {
			ok = false
		}
		b = append(b, '"')
		b = append(b, s...)
		b = append(b, '"')
	}
	b = append(b, `{"id":`...)
	str(j.ID)
	b = append(b, `,"type":`...)
	str(j.Type)
	b = append(b, `,"queue":`...)
	str(j.Queue)
	b = append(b, `,"payload":`...)
	if len(j.Payload) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, j.Payload...)
	}
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(j.Attempt), 10)
	b = append(b, `,"max_attempts":`...)
	b = strconv.AppendInt(b, int64(j.MaxAttempts), 10)
	b = append(b, `,"created_at":`...)
	b, ok = appendTime(b, j.CreatedAt, ok)
	b = append(b, `,"deadline":`...)
	if j.Deadline.IsZero() {
		b = append(b, "null"...)
	} else {
		b, ok = appendTime(b, j.Deadline, ok)
	}
	b = append(b, `,"metadata":{`...)
	if len(j.Metadata) > 0 {
		for i, k := range slices.Sorted(maps.Keys(j.Metadata)) {
			if i > 0 {
				b = append(b, ',')
			}
			str(k)
			b = append(b, ':')
			str(j.Metadata[k])
		}
	}
	b = append(b, '}')
	if j.Title != "" {
		b = append(b, `,"title":`...)
		str(j.Title)
	}
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(j.Priority), 10)
	if len(j.Tags) > 0 {
		b = append(b, `,"tags":[`...)
		for i, t := range j.Tags {
			if i > 0 {
				b = append(b, ',')
			}
			str(t)
		}
		b = append(b, ']')
	}
	b = append(b, `,"timeout_ms":`...)
	b = strconv.AppendInt(b, j.Timeout.Milliseconds(), 10)
	b = append(b, "}\n"...)
	return b, ok
}

// appendTime appends t as json writes a time.Time; ok turns false for a
// year json refuses.
func appendTime(b []byte, t time.Time, ok bool) ([]byte, bool) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, false
	}
	if _, off := t.Zone(); off%60 != 0 || off <= -24*3600 || off >= 24*3600 {
		return b, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), ok
}

// plainString reports whether json writes s as it is between quotes:
// printable ASCII, none of the characters it escapes.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// plainJSON reports whether json writes the (valid) JSON text p as it
// is: printable ASCII with no white space to compact and none of the
// characters it escapes within strings.
func plainJSON(p []byte) bool {
	for _, c := range p {
		if c <= 0x20 || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// marshalJob is encodeJob through encoding/json, for any job.
func marshalJob(j *kyu.Job) ([]byte, error) {
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
