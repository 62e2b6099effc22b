package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// copyMinJobs is the fewest new jobs that insert writes with COPY rather
// than with an INSERT of one array per column: below it the INSERT costs
// the two processes less in all.
const copyMinJobs = 20

// copyColumns are the jobs columns of the COPY stream, in insertRow's
// order and then the creation time.
const copyColumns = "id, queue, type, payload, title, priority, state, max_attempts, run_at, " +
	"timeout_ns, deadline, unique_key, unique_for_ns, tags, metadata, retention_ns, jid, created_at"

// errNoCopy: the runner cannot COPY.
var errNoCopy = errors.New("kyu/postgres: no COPY on this runner")

// copyJobs writes rows of insertRow, created at now, with one binary COPY
// into the jobs table. The stream is encoded here, column by known column,
// rather than through pgx's CopyFrom, which looks up an encoder for every
// value and cost the client more CPU than the server saved.
func (s *store) copyJobs(ctx context.Context, r pgxRunner, rows [][]any, now time.Time) error {
	data, err := encodeCopy(rows, now)
	if err != nil {
		return err
	}
	n, err := r.copyFrom(ctx, `COPY `+s.schema+`.jobs (`+copyColumns+`) FROM STDIN BINARY`, data)
	if err != nil {
		return err
	}
	if n != int64(len(rows)) {
		return fmt.Errorf("copy wrote %d of %d jobs", n, len(rows))
	}
	return nil
}

// copyFrom runs a COPY … FROM STDIN of data on the runner's connection.
func (r pgxRunner) copyFrom(ctx context.Context, sql string, data []byte) (int64, error) {
	var pc *pgconn.PgConn
	switch q := r.q.(type) {
	case *pgxpool.Pool:
		c, err := q.Acquire(ctx)
		if err != nil {
			return 0, err
		}
		defer c.Release()
		pc = c.Conn().PgConn()
	case pgx.Tx:
		pc = q.Conn().PgConn()
	default:
		return 0, errNoCopy
	}
	tag, err := pc.CopyFrom(ctx, bytes.NewReader(data), sql)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// canCopy reports whether r can run copyFrom.
func canCopy(r runner) (pgxRunner, bool) {
	pr, ok := r.(pgxRunner)
	if !ok {
		return pgxRunner{}, false
	}
	switch pr.q.(type) {
	case *pgxpool.Pool, pgx.Tx:
		return pr, true
	}
	return pgxRunner{}, false
}

// pgEpoch is PostgreSQL's time zero, 2000-01-01 UTC, in Unix microseconds.
const pgEpoch = 946684800000000

// encodeCopy encodes rows of insertRow, each followed by the creation time
// now, in PostgreSQL's binary COPY format (a header, per row the count of
// fields and each as its length, -1 for NULL, and its binary value; a
// trailer of -1).
func encodeCopy(rows [][]any, now time.Time) ([]byte, error) {
	b := make([]byte, 0, 19+len(rows)*320)
	b = append(b, "PGCOPY\n\377\r\n\000"...)
	b = binary.BigEndian.AppendUint32(b, 0) // flags
	b = binary.BigEndian.AppendUint32(b, 0) // header extension
	field := func(v []byte) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	text := func(v string) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	null := func() { b = binary.BigEndian.AppendUint32(b, 0xFFFFFFFF) }
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
	ts := func(t pgtype.Timestamptz) {
		if !t.Valid {
			null()
			return
		}
		// As pgx encodes it: microseconds, the nanoseconds truncated.
		i64(t.Time.Unix()*1000000 + int64(t.Time.Nanosecond())/1000 - pgEpoch)
	}
	jsonb := func(v []byte) {
		if v == nil {
			null()
			return
		}
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)+1))
		b = append(b, 1) // jsonb's binary format version
		b = append(b, v...)
	}
	created := pgtype.Timestamptz{Time: now, Valid: true}
	for _, r := range rows {
		id, err := uuid.Parse(r[0].(string))
		if err != nil {
			return nil, fmt.Errorf("job id %q: %w", r[0], err)
		}
		b = binary.BigEndian.AppendUint16(b, 18)
		field(id[:])
		text(r[1].(string))
		text(r[2].(string))
		field(r[3].([]byte))
		text(r[4].(string))
		i16(r[5].(int16))
		text(r[6].(string))
		i32(r[7].(int32))
		ts(r[8].(pgtype.Timestamptz))
		i64(r[9].(int64))
		ts(r[10].(pgtype.Timestamptz))
		if k := r[11].(pgtype.Text); k.Valid {
			text(k.String)
		} else {
			null()
		}
		i64(r[12].(int64))
		jsonb(r[13].([]byte))
		jsonb(r[14].([]byte))
		i64(r[15].(int64))
		if jid := r[16].(pgtype.Text); jid.Valid {
			text(jid.String)
		} else {
			null()
		}
		ts(created)
	}
	return binary.BigEndian.AppendUint16(b, 0xFFFF), nil
}
