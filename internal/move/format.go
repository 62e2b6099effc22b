// Package move moves jobs between kyu stores: it writes a store's jobs and
// queue settings as JSON lines (Export), writes such lines into a store
// (Import), and streams from one store into another (Copy), each job with
// its id, state and history, through the backend.Importer role. It is the
// body of kyu export, kyu import and kyu copy.
//
// # Format
//
// An export is JSON lines, in this order:
//
//	{"kind":"kyu-export","version":1,"created_at":…,"queue":…,"states":[…]}
//	{"kind":"queue","name":"emails","paused":false,"retention":{…}}   one per queue
//	{"id":…,"type":…,…}                                                one per job
//	{"kind":"end","jobs":N,"queues":M}
//
// A job line is the job as GET /api/v1/jobs/{id} answers it (api.Job):
// every field a store keeps, so nothing more is needed to import it. The
// header and queue lines carry a kind and no id; the end line says how
// many lines came before it, so a file cut short at a line boundary is
// still found out.
package move

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// FormatVersion is the version of the export format this package writes
// and the newest it reads.
const FormatVersion = 1

// Kinds of the lines that are not jobs.
const (
	KindHeader = "kyu-export"
	KindQueue  = "queue"
	KindEnd    = "end"
)

// Header is the first line of an export.
type Header struct {
	Kind      string          `json:"kind"`
	Version   int             `json:"version"`
	CreatedAt time.Time       `json:"created_at"`
	Queue     string          `json:"queue,omitempty"`
	States    []backend.State `json:"states,omitempty"`
}

// QueueLine carries one queue's settings.
type QueueLine struct {
	Kind      string                 `json:"kind"`
	Name      string                 `json:"name"`
	Paused    bool                   `json:"paused"`
	Retention backend.QueueRetention `json:"retention"`
}

// EndLine is the last line of an export.
type EndLine struct {
	Kind   string `json:"kind"`
	Jobs   int64  `json:"jobs"`
	Queues int64  `json:"queues"`
}

// kindOnly reads the kind and id of a line that is not known to be a job.
type kindOnly struct {
	Kind    string `json:"kind"`
	ID      string `json:"id"`
	Version int    `json:"version"`
}

// LineError is input that is not an export: it names the line.
type LineError struct {
	Line int64
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

func (e *LineError) Unwrap() error { return e.Err }

// ErrTruncated: the input ended before its end line.
var ErrTruncated = errors.New("the export ends before its end line: it was cut short")

// parsedLine is one decoded line: exactly one of its fields is set.
type parsedLine struct {
	header *Header
	queue  *QueueLine
	job    *backend.Job
	end    *EndLine
}

// parseLine decodes one line (without its newline).
func parseLine(b []byte) (parsedLine, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return parsedLine{}, errors.New("not a JSON object")
	}
	if !bytes.HasPrefix(b, []byte(`{"id":`)) {
		var k kindOnly
		if err := json.Unmarshal(b, &k); err != nil {
			return parsedLine{}, fmt.Errorf("not JSON: %w", err)
		}
		switch {
		case k.Kind == KindHeader:
			var h Header
			if err := strictDecode(b, &h); err != nil {
				return parsedLine{}, fmt.Errorf("header: %w", err)
			}
			if h.Version > FormatVersion || h.Version < 1 {
				return parsedLine{}, fmt.Errorf("format version %d: this kyu reads versions 1 to %d (a newer kyu wrote it?)", h.Version, FormatVersion)
			}
			return parsedLine{header: &h}, nil
		case k.Kind == KindQueue:
			var q QueueLine
			if err := strictDecode(b, &q); err != nil {
				return parsedLine{}, fmt.Errorf("queue line: %w", err)
			}
			if !backend.ValidQueueName(q.Name) || !q.Retention.Valid() {
				return parsedLine{}, fmt.Errorf("queue line: bad name %q or retention", q.Name)
			}
			return parsedLine{queue: &q}, nil
		case k.Kind == KindEnd:
			var e EndLine
			if err := strictDecode(b, &e); err != nil {
				return parsedLine{}, fmt.Errorf("end line: %w", err)
			}
			return parsedLine{end: &e}, nil
		case k.Kind != "":
			return parsedLine{}, fmt.Errorf("unknown kind %q", k.Kind)
		case k.ID == "":
			return parsedLine{}, errors.New("not a job (no id) nor a line with a kind")
		}
	}
	var j api.Job
	if err := strictDecode(b, &j); err != nil {
		return parsedLine{}, fmt.Errorf("not a job: %w", err)
	}
	if j.ID == "" {
		return parsedLine{}, errors.New("not a job: no id")
	}
	return parsedLine{job: j.Backend()}, nil
}

// strictDecode decodes one JSON value, refusing unknown fields.
func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

// appendJSONLine appends v as one line of JSON.
func appendJSONLine(buf *bytes.Buffer, v any) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
