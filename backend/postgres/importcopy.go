package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kyuhq/kyu/backend"
)

// importCopyColumns are the jobs columns of an import's COPY stream, in
// sqlImport's order.
const importCopyColumns = "id, type, queue, payload, title, priority, state, attempt, max_attempts, " +
	"run_at, timeout_ns, deadline, unique_key, unique_for_ns, tags, metadata, retention_ns, created_at, " +
	"started_at, finished_at, worker_id, lease_token, lease_expires_at, errors, result, cancel_reason, " +
	"cancel_requested, progress, log_count, logs_dropped, delete_at"

// importByCopy writes a batch of new jobs that hold no unique key, have
// no JID (whose holders the general path locks and reads) and have no
// log lines with one binary COPY, its own transaction: no
// statement per batch beyond it, no array decoding on the server, and
// one round trip fewer than a transaction's BEGIN and COMMIT. It is the
// path of a copy into an empty store. ok is false, with nothing written,
// when the batch is not such a batch or the server refused the COPY (an
// id that exists, above all); Import then writes it the general way.
func (s *store) importByCopy(ctx context.Context, p backend.ImportParams, items []backend.ImportItem) (ok bool, pending []string, err error) {
	if len(p.Jobs) < copyMinJobs {
		return false, nil, nil
	}
	for _, j := range p.Jobs {
		if len(j.Logs) > 0 || j.JID != "" || backend.HoldsKey(j, p.Now) {
			return false, nil, nil
		}
	}
	data, err := encodeImportCopy(p.Jobs)
	if err != nil {
		return false, nil, err
	}
	n, err := pgxRunner{s.pool}.copyFrom(ctx, `COPY `+s.schema+`.jobs (`+importCopyColumns+`) FROM STDIN BINARY`, data)
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, err
	}
	if n != int64(len(p.Jobs)) {
		return false, nil, fmt.Errorf("copy wrote %d of %d jobs", n, len(p.Jobs))
	}
	for i, j := range p.Jobs {
		items[i] = backend.ImportItem{Outcome: backend.ImportCreated}
		if j.State == backend.StatePending && !slices.Contains(pending, j.Queue) {
			pending = append(pending, j.Queue)
		}
	}
	return true, pending, nil
}

// encodeImportCopy encodes whole jobs as a binary COPY stream
// (copyStream), with the values importCopyColumns names.
func encodeImportCopy(jobs []*backend.Job) ([]byte, error) {
	c := newCopyStream(len(jobs) * 512)
	ts := func(t time.Time) { c.timestamp(t, !t.IsZero()) }
	jsonb := func(v any, empty bool) error {
		if empty {
			c.null()
			return nil
		}
		enc, err := json.Marshal(v)
		if err != nil {
			return err
		}
		c.jsonb(enc)
		return nil
	}
	for _, j := range jobs {
		id, err := uuid.Parse(j.ID)
		if err != nil {
			return nil, fmt.Errorf("job id %q: %w", j.ID, err)
		}
		c.row(31)
		c.field(id[:])
		c.text(j.Type)
		c.text(j.Queue)
		c.field(j.Payload)
		c.text(j.Title)
		c.i16(int16(j.Priority))
		c.text(string(j.State))
		c.i32(int32(j.Attempt))
		c.i32(int32(j.MaxAttempts))
		ts(j.RunAt)
		c.i64(int64(j.Timeout))
		ts(j.Deadline)
		c.nullText(j.UniqueKey)
		c.i64(int64(j.UniqueFor))
		if err := jsonb(j.Tags, len(j.Tags) == 0); err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, err)
		}
		if err := jsonb(j.Metadata, len(j.Metadata) == 0); err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, err)
		}
		c.i64(int64(j.Retention))
		ts(j.CreatedAt)
		ts(j.StartedAt)
		ts(j.FinishedAt)
		c.nullText(j.WorkerID)
		c.i64(j.LeaseToken)
		ts(j.LeaseExpiresAt)
		if err := jsonb(j.Errors, len(j.Errors) == 0); err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, err)
		}
		c.nullBytes(j.Result)
		c.nullText(j.CancelReason)
		c.boolean(j.CancelRequested)
		if err := jsonb(j.Progress, j.Progress == nil); err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, err)
		}
		c.i32(int32(len(j.Logs)))
		c.i32(int32(j.LogsDropped))
		ts(j.ExpiresAt)
	}
	return c.end(), nil
}
