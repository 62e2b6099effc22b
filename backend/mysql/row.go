package mysql

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// jobColumns are the columns scanRow reads, in its order.
var jobColumns = []string{"id", "queue", "state", "priority", "run_at", "type", "title", "attempt", "max_attempts",
	"lease_token", "timeout_ns", "deadline", "unique_key", "unique_for_ns", "retention_ns", "created_at",
	"started_at", "finished_at", "expires_at", "lease_expires_at", "worker_id", "cancel_reason",
	"cancel_requested", "tags", "metadata", "errors", "progress", "logs_dropped", "log_count", "payload", "result", "jid"}

// newJobColumns are the columns an enqueue writes, in insertArgs's
// order; the others take their defaults (zero, false or NULL), which is
// what a new job has.
var newJobColumns = []string{"id", "queue", "state", "priority", "run_at", "type", "title", "max_attempts",
	"timeout_ns", "deadline", "unique_key", "unique_for_ns", "retention_ns", "created_at", "tags", "metadata", "payload", "jid"}

// mutableColumns are the columns a job's later steps change; saveRows
// writes them back.
var mutableColumns = []string{"state", "run_at", "attempt", "max_attempts", "lease_token", "deadline",
	"started_at", "finished_at", "expires_at", "lease_expires_at", "worker_id", "cancel_reason",
	"cancel_requested", "errors", "progress", "logs_dropped", "log_count", "result"}

// selectCols lists jobColumns for a SELECT from the jobs table aliased j;
// without payload, the payload and the result are read as NULL (a
// listing, or a step that changes neither).
func selectCols(payload bool) string {
	var b strings.Builder
	for i, c := range jobColumns {
		if i > 0 {
			b.WriteString(", ")
		}
		if !payload && (c == "payload" || c == "result") {
			b.WriteString("NULL")
			continue
		}
		b.WriteString("j.")
		b.WriteString(c)
	}
	return b.String()
}

// row is a job as stored, with the bookkeeping that is not part of
// backend.Job.
type row struct {
	*backend.Job
	logCount int
	// hasResult says the result was read (false for rows read without
	// payload, whose result must not be overwritten).
	hasResult bool
	// was is the state the row had when it was read.
	was backend.State
}

// scanner is what *sql.Row and *sql.Rows have in common.
type scanner interface {
	Scan(dest ...any) error
}

// scanRow reads one row of selectCols; a row holding values kyu never
// writes gives an error matching ErrCorrupt that names the job and field.
func scanRow(sc scanner, withPayload bool, extra ...any) (*row, error) {
	var (
		j                                                    backend.Job
		state                                                string
		deadline, started, finished, expires, leaseExp       sql.NullInt64
		uniqueKey, jid                                       []byte
		workerID, cancelReason, tags, metadata, errs, progr  sql.NullString
		runAt, created, timeout, uniqueFor, retention, token int64
		priority, attempt, maxAttempts, dropped, logCount    int
		cancelRequested                                      bool
		payload, result                                      []byte
	)
	err := sc.Scan(append([]any{&j.ID, &j.Queue, &state, &priority, &runAt, &j.Type, &j.Title, &attempt, &maxAttempts,
		&token, &timeout, &deadline, &uniqueKey, &uniqueFor, &retention, &created,
		&started, &finished, &expires, &leaseExp, &workerID, &cancelReason,
		&cancelRequested, &tags, &metadata, &errs, &progr, &dropped, &logCount, &payload, &result, &jid}, extra...)...)
	if err != nil {
		return nil, err
	}
	corrupt := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: job %s: %s: %s", ErrCorrupt, j.ID, field, fmt.Sprintf(format, args...))
	}
	j.State = backend.State(state)
	if !j.State.Valid() {
		return nil, corrupt("state", "unknown state %q", state)
	}
	if priority < backend.MinPriority || priority > backend.MaxPriority {
		return nil, corrupt("priority", "%d is outside [%d, %d]", priority, backend.MinPriority, backend.MaxPriority)
	}
	if attempt < 0 || maxAttempts < 1 {
		return nil, corrupt("attempt", "attempt %d of %d", attempt, maxAttempts)
	}
	j.Priority, j.Attempt, j.MaxAttempts, j.LogsDropped = priority, attempt, maxAttempts, dropped
	j.LeaseToken = token
	j.RunAt, j.CreatedAt = fromMicros(runAt), fromMicros(created)
	j.Timeout, j.UniqueFor, j.Retention = time.Duration(timeout), time.Duration(uniqueFor), backend.Retention(retention)
	if !j.Retention.Valid() {
		return nil, corrupt("retention", "unknown value %d", retention)
	}
	j.Deadline, j.StartedAt, j.FinishedAt = nullTime(deadline), nullTime(started), nullTime(finished)
	j.ExpiresAt, j.LeaseExpiresAt = nullTime(expires), nullTime(leaseExp)
	j.UniqueKey, j.JID = string(uniqueKey), string(jid)
	j.WorkerID, j.CancelReason = workerID.String, cancelReason.String
	j.CancelRequested = cancelRequested
	if tags.Valid && tags.String != "" {
		if err := json.Unmarshal([]byte(tags.String), &j.Tags); err != nil {
			return nil, corrupt("tags", "%v", err)
		}
	}
	if metadata.Valid && metadata.String != "" {
		if err := json.Unmarshal([]byte(metadata.String), &j.Metadata); err != nil {
			return nil, corrupt("metadata", "%v", err)
		}
	}
	if errs.Valid && errs.String != "" {
		if err := json.Unmarshal([]byte(errs.String), &j.Errors); err != nil {
			return nil, corrupt("errors", "%v", err)
		}
	}
	if progr.Valid && progr.String != "" {
		var p backend.Progress
		if err := json.Unmarshal([]byte(progr.String), &p); err != nil {
			return nil, corrupt("progress", "%v", err)
		}
		j.Progress = &p
	}
	if withPayload {
		if payload == nil {
			payload = []byte{}
		}
		j.Payload, j.Result = payload, result
	}
	return &row{Job: &j, logCount: logCount, hasResult: withPayload, was: j.State}, nil
}

// micros is t as the store keeps it, Unix microseconds.
func micros(t time.Time) int64 { return t.UnixMicro() }

// nullMicros is t as micros, NULL for the zero time.
func nullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func nullTime(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

// nullString is s, NULL when empty.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullBytes is s as bytes for a binary column, NULL when empty.
func nullBytes(s string) any {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// jsonText encodes v as JSON text, NULL for an empty list or map.
func jsonText[T any](v T, empty bool) (any, error) {
	if empty {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// mutableArgs appends the values of mutableColumns for r.
func mutableArgs(args []any, r *row) ([]any, error) {
	j := r.Job
	errs, err := jsonText(j.Errors, len(j.Errors) == 0)
	if err != nil {
		return nil, fmt.Errorf("encode errors of %s: %w", j.ID, err)
	}
	prog, err := jsonText(j.Progress, j.Progress == nil)
	if err != nil {
		return nil, fmt.Errorf("encode progress of %s: %w", j.ID, err)
	}
	return append(args, string(j.State), micros(j.RunAt), j.Attempt, j.MaxAttempts, j.LeaseToken,
		nullMicros(j.Deadline), nullMicros(j.StartedAt), nullMicros(j.FinishedAt), nullMicros(j.ExpiresAt),
		nullMicros(j.LeaseExpiresAt), nullString(j.WorkerID), nullString(j.CancelReason), j.CancelRequested,
		errs, prog, j.LogsDropped, r.logCount, j.Result), nil
}

// placeholders returns "(?, ?, …)" with n marks.
func placeholders(n int) string {
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
}
