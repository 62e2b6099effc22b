package postgres

import (
	"context"
	"encoding/binary"
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

// encodeImportCopy encodes whole jobs in PostgreSQL's binary COPY format
// (see encodeCopy), with the values importColumns gives.
func encodeImportCopy(jobs []*backend.Job) ([]byte, error) {
	b := make([]byte, 0, 21+len(jobs)*512)
	b = append(b, "PGCOPY\n\377\r\n\000"...)
	b = binary.BigEndian.AppendUint32(b, 0) // flags
	b = binary.BigEndian.AppendUint32(b, 0) // header extension
	field := func(v []byte) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	null := func() { b = binary.BigEndian.AppendUint32(b, 0xFFFFFFFF) }
	text := func(v string) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	nullText := func(v string) {
		if v == "" {
			null()
			return
		}
		text(v)
	}
	i16 := func(v int16) {
		b = binary.BigEndian.AppendUint32(b, 2)
		b = binary.BigEndian.AppendUint16(b, uint16(v))
	}
	i32 := func(v int32) {
		b = binary.BigEndian.AppendUint32(b, 4)
		b = binary.BigEndian.AppendUint32(b, uint32(v))
	}
	i64 := func(v int64) {
		b = binary.BigEndian.AppendUint32(b, 8)
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	ts := func(t time.Time) {
		if t.IsZero() {
			null()
			return
		}
		// As pgx encodes it: microseconds, the nanoseconds truncated.
		i64(t.Unix()*1000000 + int64(t.Nanosecond())/1000 - pgEpoch)
	}
	jsonb := func(v any, empty bool) error {
		if empty {
			null()
			return nil
		}
		at := len(b)
		b = append(b, 0, 0, 0, 0, 1) // length, then jsonb's format version
		enc, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b = append(b, enc...)
		binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
		return nil
	}
	for _, j := range jobs {
		id, err := uuid.Parse(j.ID)
		if err != nil {
			return nil, fmt.Errorf("job id %q: %w", j.ID, err)
		}
		b = binary.BigEndian.AppendUint16(b, 31)
		field(id[:])
		text(j.Type)
		text(j.Queue)
		field(j.Payload)
		text(j.Title)
		i16(int16(j.Priority))
		text(string(j.State))
		i32(int32(j.Attempt))
		i32(int32(j.MaxAttempts))
		ts(j.RunAt)
		i64(int64(j.Timeout))
		ts(j.Deadline)
		nullText(j.UniqueKey)
		i64(int64(j.UniqueFor))
		if err := jsonb(j.Tags, len(j.Tags) == 0); err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, err)
		}
		if err := jsonb(j.Metadata, len(j.Metadata) == 0); err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, err)
		}
		i64(int64(j.Retention))
		ts(j.CreatedAt)
		ts(j.StartedAt)
		ts(j.FinishedAt)
		nullText(j.WorkerID)
		i64(j.LeaseToken)
		ts(j.LeaseExpiresAt)
		if err := jsonb(j.Errors, len(j.Errors) == 0); err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, err)
		}
		if j.Result == nil {
			null()
		} else {
			field(j.Result)
		}
		nullText(j.CancelReason)
		b = binary.BigEndian.AppendUint32(b, 1)
		if j.CancelRequested {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		if err := jsonb(j.Progress, j.Progress == nil); err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, err)
		}
		i32(int32(len(j.Logs)))
		i32(int32(j.LogsDropped))
		ts(j.ExpiresAt)
	}
	return binary.BigEndian.AppendUint16(b, 0xFFFF), nil
}
