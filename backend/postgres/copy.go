package postgres

import (
	"bytes"
	"context"
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

// encodeCopy encodes rows of insertRow, each followed by the creation time
// now, as a binary COPY stream (copyStream).
func encodeCopy(rows [][]any, now time.Time) ([]byte, error) {
	c := newCopyStream(len(rows) * 320)
	ts := func(t pgtype.Timestamptz) { c.timestamp(t.Time, t.Valid) }
	nullText := func(t pgtype.Text) {
		if t.Valid {
			c.text(t.String)
		} else {
			c.null()
		}
	}
	for _, r := range rows {
		id, err := uuid.Parse(r[0].(string))
		if err != nil {
			return nil, fmt.Errorf("job id %q: %w", r[0], err)
		}
		c.row(18)
		c.field(id[:])
		c.text(r[1].(string))
		c.text(r[2].(string))
		c.field(r[3].([]byte))
		c.text(r[4].(string))
		c.i16(r[5].(int16))
		c.text(r[6].(string))
		c.i32(r[7].(int32))
		ts(r[8].(pgtype.Timestamptz))
		c.i64(r[9].(int64))
		ts(r[10].(pgtype.Timestamptz))
		nullText(r[11].(pgtype.Text))
		c.i64(r[12].(int64))
		c.jsonb(r[13].([]byte))
		c.jsonb(r[14].([]byte))
		c.i64(r[15].(int64))
		nullText(r[16].(pgtype.Text))
		c.timestamp(now, true)
	}
	return c.end(), nil
}
