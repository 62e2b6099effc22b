package postgres

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kyuhq/kyu/backend"
)

// jobColumnNames are the columns scanJob reads, in its order; cols puts
// them into a query.
func jobColumnNames() []string {
	return []string{"id", "type", "queue", "payload", "title", "priority", "state", "attempt", "max_attempts",
		"run_at", "timeout_ns", "deadline", "unique_key", "unique_for_ns", "tags", "metadata",
		"retention_ns", "created_at", "started_at", "finished_at", "worker_id", "lease_token",
		"lease_expires_at", "errors", "result", "cancel_reason",
		"cancel_requested", "progress", "logs_dropped", "delete_at", "jid"}
}

// cols lists jobColumnNames for a SELECT or RETURNING, each prefixed with
// alias and a dot when alias is not empty. For a listing, the payload and
// the result are left out (NULL in their places).
func cols(alias string, listing bool) string {
	out := ""
	for i, c := range jobColumnNames() {
		if i > 0 {
			out += ", "
		}
		if listing && (c == "payload" || c == "result") {
			out += "NULL::bytea"
			continue
		}
		if alias != "" {
			out += alias + "."
		}
		if c == "id" {
			out += c + "::text"
			continue
		}
		out += c
	}
	return out
}

// rawJob is one row as scanned, before it is checked.
type rawJob struct {
	id, typ, queue        string
	payload               []byte
	title                 string
	priority              int16
	state                 string
	attempt, maxAttempts  int32
	runAt                 time.Time
	timeout               int64
	deadline              pgtype.Timestamptz
	uniqueKey             pgtype.Text
	uniqueFor             int64
	tags, metadata        []byte
	retention             int64
	createdAt             time.Time
	startedAt, finishedAt pgtype.Timestamptz
	workerID              pgtype.Text
	leaseToken            int64
	leaseExpiresAt        pgtype.Timestamptz
	errors                []byte
	result                []byte
	cancelReason          pgtype.Text
	cancelRequested       bool
	progress              []byte
	logsDropped           int32
	expiresAt             pgtype.Timestamptz
	jid                   pgtype.Text
	logs                  []byte // JSON; only where the query reads them
}

// scanJob reads one row of cols("") into a Job, refusing values kyu never
// writes with an error wrapping ErrCorrupt.
func scanJob(row pgx.Row) (*backend.Job, error) {
	return scanJobLogs(row, false)
}

// scanJobLogs is scanJob for a row that, with logs, ends in the job's log
// lines as a JSON array (sqlGet).
func scanJobLogs(row pgx.Row, logs bool) (*backend.Job, error) {
	return scanJobExtra(row, logs)
}

// scanJobExtra is scanJobLogs for a row that ends in more columns, read
// into extra.
func scanJobExtra(row pgx.Row, logs bool, extra ...any) (*backend.Job, error) {
	var r rawJob
	dest := []any{&r.id, &r.typ, &r.queue, &r.payload, &r.title, &r.priority, &r.state, &r.attempt, &r.maxAttempts,
		&r.runAt, &r.timeout, &r.deadline, &r.uniqueKey, &r.uniqueFor, &r.tags, &r.metadata,
		&r.retention, &r.createdAt, &r.startedAt, &r.finishedAt, &r.workerID, &r.leaseToken,
		&r.leaseExpiresAt, &r.errors, &r.result, &r.cancelReason,
		&r.cancelRequested, &r.progress, &r.logsDropped, &r.expiresAt, &r.jid}
	if logs {
		dest = append(dest, &r.logs)
	}
	dest = append(dest, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	return r.job()
}

// job checks a scanned row and builds the Job.
func (r *rawJob) job() (*backend.Job, error) {
	corrupt := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: job %s: %s: %s", ErrCorrupt, r.id, field, fmt.Sprintf(format, args...))
	}
	state := backend.State(r.state)
	switch {
	case !state.Valid():
		return nil, corrupt("state", "unknown state %q", r.state)
	case r.attempt < 0 || r.maxAttempts < 1:
		return nil, corrupt("attempt", "attempt %d of %d", r.attempt, r.maxAttempts)
	case int(r.priority) < backend.MinPriority || int(r.priority) > backend.MaxPriority:
		return nil, corrupt("priority", "%d is outside [%d, %d]", r.priority, backend.MinPriority, backend.MaxPriority)
	case !backend.Retention(r.retention).Valid():
		return nil, corrupt("retention", "unknown value %d", r.retention)
	case r.timeout < 0 || r.uniqueFor < 0:
		return nil, corrupt("timeout", "negative duration")
	case r.leaseToken < 0:
		return nil, corrupt("lease_token", "%d is negative", r.leaseToken)
	case state == backend.StateActive && !r.leaseExpiresAt.Valid:
		return nil, corrupt("lease_expires_at", "an active job without a lease")
	case r.logsDropped < 0:
		return nil, corrupt("logs_dropped", "%d is negative", r.logsDropped)
	}
	j := &backend.Job{
		ID:          r.id,
		Type:        r.typ,
		Queue:       r.queue,
		Payload:     r.payload,
		Title:       r.title,
		Priority:    int(r.priority),
		State:       state,
		Attempt:     int(r.attempt),
		MaxAttempts: int(r.maxAttempts),
		RunAt:       r.runAt.UTC(),
		Timeout:     time.Duration(r.timeout),
		Deadline:    optTime(r.deadline),
		UniqueKey:   r.uniqueKey.String,
		UniqueFor:   time.Duration(r.uniqueFor),
		JID:         r.jid.String,
		Retention:   backend.Retention(r.retention),
		CreatedAt:   r.createdAt.UTC(),
		StartedAt:   optTime(r.startedAt),
		FinishedAt:  optTime(r.finishedAt),
		WorkerID:    r.workerID.String,
		LeaseToken:  r.leaseToken,

		LeaseExpiresAt: optTime(r.leaseExpiresAt),
		Result:         r.result,
		CancelReason:   r.cancelReason.String,

		CancelRequested: r.cancelRequested,
		LogsDropped:     int(r.logsDropped),
		ExpiresAt:       optTime(r.expiresAt),
	}
	if len(r.progress) > 0 {
		if err := json.Unmarshal(r.progress, &j.Progress); err != nil {
			return nil, corrupt("progress", "not a JSON progress record: %v", err)
		}
		if j.Progress != nil {
			j.Progress.At = j.Progress.At.UTC()
		}
	}
	if len(r.logs) > 0 {
		if err := json.Unmarshal(r.logs, &j.Logs); err != nil {
			return nil, corrupt("logs", "not a JSON array of log lines: %v", err)
		}
		for i := range j.Logs {
			j.Logs[i].At = j.Logs[i].At.UTC()
		}
	}
	if len(r.tags) > 0 {
		if err := json.Unmarshal(r.tags, &j.Tags); err != nil {
			return nil, corrupt("tags", "not a JSON array of strings: %v", err)
		}
	}
	if len(r.metadata) > 0 {
		if err := json.Unmarshal(r.metadata, &j.Metadata); err != nil {
			return nil, corrupt("metadata", "not a JSON object of strings: %v", err)
		}
	}
	if len(r.errors) > 0 {
		if err := json.Unmarshal(r.errors, &j.Errors); err != nil {
			return nil, corrupt("errors", "not a JSON array of attempt errors: %v", err)
		}
	}
	return j, nil
}

// optTime turns a nullable time into a Job time (zero for NULL), in UTC.
func optTime(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

// nullTime is a Job time as a parameter: NULL for the zero time.
func nullTime(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()}
}

// nullText is a string as a parameter: NULL for "".
func nullText(s string) pgtype.Text {
	return pgtype.Text{String: s, Valid: s != ""}
}
