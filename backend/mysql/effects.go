package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// effects gathers what one transaction does to job rows it holds, to be
// written in a few statements at its end (flush), and what to announce
// once it has committed (announce). Operations change the rows in Go,
// as the contract reads; the statements only store the outcome.
type effects struct {
	s        *store
	settings map[string]backend.QueueSettings
	save     []*row
	del      []*row
	// counts and queueCounts count ended attempts (processed, failed)
	// per minute, and per queue and minute.
	counts      map[int64]*[2]int64
	queueCounts map[queueMinute]*[2]int64
	// woken are the queues that got pending jobs; ended the jobs that
	// became final or were deleted.
	woken []string
	ended []string
	// lines are log lines to append: job id, seq, at, text, flat.
	lines []any
	// completed are rows that Complete made completed and changed in
	// nothing else (no result): written with one UPDATE per expiry.
	completed  []*row
	finishedAt int64
}

func (s *store) newEffects() *effects {
	return &effects{s: s, settings: map[string]backend.QueueSettings{},
		counts: map[int64]*[2]int64{}, queueCounts: map[queueMinute]*[2]int64{}}
}

// loadSettings reads the settings of the queues of rows not read yet.
func (e *effects) loadSettings(ctx context.Context, tx queryer, queues []string) error {
	var missing []any
	for _, q := range queues {
		if _, ok := e.settings[q]; !ok && !slices.Contains(missing, any(q)) {
			missing = append(missing, q)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	for _, q := range missing {
		e.settings[q.(string)] = backend.QueueSettings{}
	}
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(e.s.sqls.queueSettings, placeholders(len(missing))), missing...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var qs backend.QueueSettings
		var c, f, x int64
		if err := rows.Scan(&name, &qs.Paused, &c, &f, &x); err != nil {
			return err
		}
		qs.Retention = backend.QueueRetention{Completed: backend.Retention(c), Failed: backend.Retention(f), Cancelled: backend.Retention(x)}
		e.settings[name] = qs
	}
	return rows.Err()
}

// changed marks r to be written back.
func (e *effects) changed(r *row) {
	if !slices.Contains(e.save, r) {
		e.save = append(e.save, r)
	}
}

// pending marks r pending in its queue.
func (e *effects) pending(r *row, runAt time.Time) {
	r.State, r.RunAt = backend.StatePending, runAt
	e.wake(r.Queue)
	e.changed(r)
}

func (e *effects) wake(queue string) {
	if !slices.Contains(e.woken, queue) {
		e.woken = append(e.woken, queue)
	}
}

// finish moves r to a final state at now and applies backend.Expiry:
// delete it in this step, or set its ExpiresAt. The settings of r's
// queue must be loaded.
func (e *effects) finish(r *row, state backend.State, now time.Time) {
	r.State, r.FinishedAt = state, now
	r.LeaseExpiresAt, r.WorkerID = time.Time{}, ""
	at, deleteNow := backend.Expiry(r.Retention, e.settings[r.Queue].Retention, state, now, len(r.Result) > 0)
	r.ExpiresAt = at
	e.ended = append(e.ended, r.ID)
	if deleteNow {
		e.remove(r)
		return
	}
	e.changed(r)
}

// cancelled ends r cancelled for reason.
func (e *effects) cancelled(r *row, reason string, now time.Time) {
	r.CancelReason = reason
	e.finish(r, backend.StateCancelled, now)
}

// remove deletes r in this step.
func (e *effects) remove(r *row) {
	if i := slices.Index(e.save, r); i >= 0 {
		e.save = slices.Delete(e.save, i, i+1)
	}
	e.del = append(e.del, r)
	if !slices.Contains(e.ended, r.ID) {
		e.ended = append(e.ended, r.ID)
	}
}

// queueMinute keys the counts of a queue's minute (Unix microseconds).
type queueMinute struct {
	queue  string
	minute int64
}

// count adds one ended attempt of a job of queue to the minute of now,
// store-wide and for the queue.
func (e *effects) count(queue string, now time.Time, failed bool) {
	m := backend.MinuteOf(now).UnixMicro()
	addAttempt(e.counts, m, failed)
	addAttempt(e.queueCounts, queueMinute{queue, m}, failed)
}

// addAttempt adds one ended attempt to counts[k].
func addAttempt[K comparable](counts map[K]*[2]int64, k K, failed bool) {
	c := counts[k]
	if c == nil {
		c = &[2]int64{}
		counts[k] = c
	}
	c[0]++
	if failed {
		c[1]++
	}
}

// flushChunk bounds the rows of one statement.
const flushChunk = 200

// countFinal adds the changes of the rows written in this flush to the
// counts of final jobs per queue and state.
func (e *effects) countFinal(ctx context.Context, tx queryer) error {
	delta := map[[2]string]int64{}
	add := func(queue string, st backend.State, n int64) {
		if st.Final() {
			delta[[2]string{queue, string(st)}] += n
		}
	}
	for _, r := range append(append([]*row(nil), e.save...), e.completed...) {
		if r.was != r.State {
			add(r.Queue, r.was, -1)
			add(r.Queue, r.State, 1)
		}
	}
	for _, r := range e.del {
		add(r.Queue, r.was, -1)
	}
	for _, r := range append(append(append([]*row(nil), e.save...), e.completed...), e.del...) {
		r.was = r.State
	}
	var args []any
	var vals []string
	shard := rand.IntN(8)
	for k, n := range delta {
		if n != 0 {
			args = append(args, k[0], k[1], shard, n)
			vals = append(vals, "(?, ?, ?, ?)")
		}
	}
	if len(vals) == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, fmt.Sprintf(e.s.sqls.countFinal, strings.Join(vals, ", ")), args...)
	return err
}

// completedPlainly moves r, which the caller made completed with no
// result and changed in nothing else, from the rows to save to those
// written by the lean statement.
func (e *effects) completedPlainly(r *row) {
	if i := slices.Index(e.save, r); i >= 0 {
		e.save = slices.Delete(e.save, i, i+1)
		e.completed = append(e.completed, r)
	}
}

// flushCompleted writes the rows of completedPlainly, one statement per
// expiry (the expiry is the same for the jobs of a queue in one call).
func (e *effects) flushCompleted(ctx context.Context, tx queryer) error {
	groups := map[int64][]any{}
	for _, r := range e.completed {
		k := int64(-1)
		if !r.ExpiresAt.IsZero() {
			k = micros(r.ExpiresAt)
		}
		groups[k] = append(groups[k], r.ID)
	}
	e.completed = nil
	for k, ids := range groups {
		var expires any
		if k >= 0 {
			expires = k
		}
		finished := e.finishedAt
		for len(ids) > 0 {
			n := min(len(ids), flushChunk)
			args := append([]any{finished, expires}, ids[:n]...)
			if _, err := tx.ExecContext(ctx, fmt.Sprintf(e.s.sqls.completePlain, placeholders(n)), args...); err != nil {
				return err
			}
			ids = ids[n:]
		}
	}
	return nil
}

// flushRows writes the rows changed and deleted so far in tx, so that
// later statements of the transaction see them.
func (e *effects) flushRows(ctx context.Context, tx queryer) error {
	if err := e.countFinal(ctx, tx); err != nil {
		return err
	}
	if err := e.flushCompleted(ctx, tx); err != nil {
		return err
	}
	if err := e.s.saveRows(ctx, tx, e.save); err != nil {
		return err
	}
	if err := e.s.deleteRows(ctx, tx, e.del); err != nil {
		return err
	}
	e.save, e.del = nil, nil
	return nil
}

// flush writes the effects in tx.
func (e *effects) flush(ctx context.Context, tx queryer) error {
	if err := e.flushRows(ctx, tx); err != nil {
		return err
	}
	for ls := e.lines; len(ls) > 0; {
		n := min(len(ls), 4*flushChunk)
		if _, err := tx.ExecContext(ctx, e.s.insertLines(n/4), ls[:n]...); err != nil {
			return err
		}
		ls = ls[n:]
	}
	if len(e.counts) > 0 {
		var args []any
		var vals []string
		shard := rand.IntN(8)
		for m, c := range e.counts {
			vals = append(vals, "(?, ?, ?, ?)")
			args = append(args, m, shard, c[0], c[1])
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(e.s.sqls.count, strings.Join(vals, ", ")), args...); err != nil {
			return err
		}
	}
	if len(e.queueCounts) > 0 {
		// In key order, so that two transactions take the rows' locks
		// in the same order.
		keys := slices.SortedFunc(maps.Keys(e.queueCounts), func(a, b queueMinute) int {
			return cmp.Or(cmp.Compare(a.queue, b.queue), cmp.Compare(a.minute, b.minute))
		})
		var args []any
		var vals []string
		shard := rand.IntN(8)
		for _, k := range keys {
			c := e.queueCounts[k]
			vals = append(vals, "(?, ?, ?, ?, ?)")
			args = append(args, k.queue, k.minute, shard, c[0], c[1])
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(e.s.sqls.countQueue, strings.Join(vals, ", ")), args...); err != nil {
			return err
		}
	}
	return nil
}

// announce tells the store's subscribers what the committed step did.
func (e *effects) announce() {
	e.s.signals.wake(e.woken)
	e.s.watches.ended(e.ended)
}

// saveRows writes back the mutable columns of rows the transaction
// holds; the result only of rows read with it.
func (s *store) saveRows(ctx context.Context, tx queryer, rows []*row) error {
	var with, without []*row
	for _, r := range rows {
		if r.hasResult {
			with = append(with, r)
		} else {
			without = append(without, r)
		}
	}
	for _, group := range []struct {
		rows []*row
		q    string
	}{{with, s.sqls.saveResult}, {without, s.sqls.save}} {
		for rs := group.rows; len(rs) > 0; {
			n := min(len(rs), flushChunk)
			chunk := rs[:n]
			rs = rs[n:]
			args := make([]any, 0, len(chunk)*(8+len(mutableColumns)))
			vals := make([]string, 0, len(chunk))
			for _, r := range chunk {
				var err error
				args = append(args, r.ID, "", 0, "", "", 0, 0, "")
				if args, err = mutableArgs(args, r); err != nil {
					return err
				}
				vals = append(vals, placeholders(8+len(mutableColumns)))
			}
			if _, err := tx.ExecContext(ctx, fmt.Sprintf(group.q, strings.Join(vals, ", ")), args...); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteRows deletes jobs the transaction holds, with their log lines,
// and settles their unique keys.
func (s *store) deleteRows(ctx context.Context, tx queryer, rows []*row) error {
	for len(rows) > 0 {
		n := min(len(rows), flushChunk)
		chunk := rows[:n]
		rows = rows[n:]
		ids := make([]any, len(chunk))
		for i, r := range chunk {
			ids[i] = r.ID
		}
		in := placeholders(len(ids))
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(s.sqls.deleteJobs, in), ids...); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(s.sqls.deleteLogs, in), ids...); err != nil {
			return err
		}
		for _, r := range chunk {
			if r.UniqueKey == "" {
				continue
			}
			if _, err := tx.ExecContext(ctx, s.sqls.keyFree, r.Queue, []byte(r.UniqueKey), r.ID); err != nil {
				return err
			}
			if r.UniqueFor > 0 {
				if _, err := tx.ExecContext(ctx, s.sqls.keyKeep, string(r.State), r.Queue, []byte(r.UniqueKey), r.ID); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// lockRows reads and locks the jobs with the given ids, by id.
func (s *store) lockRows(ctx context.Context, tx *sql.Tx, ids []string, withPayload bool) (map[string]*row, error) {
	out := map[string]*row{}
	var uniq []any
	for _, id := range ids {
		if !slices.Contains(uniq, any(id)) {
			uniq = append(uniq, id)
		}
	}
	q := s.sqls.lockRows
	if withPayload {
		q = s.sqls.lockRowsPayload
	}
	for len(uniq) > 0 {
		n := min(len(uniq), flushChunk)
		chunk := uniq[:n]
		uniq = uniq[n:]
		if err := s.queryRows(ctx, tx, fmt.Sprintf(q, placeholders(len(chunk))), chunk, withPayload, func(r *row) {
			out[r.ID] = r
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// lockRowsSettings is lockRows that also loads the retention settings of
// the rows' queues into e, in the same statement.
func (s *store) lockRowsSettings(ctx context.Context, tx *sql.Tx, e *effects, ids []string) (map[string]*row, error) {
	out := map[string]*row{}
	var uniq []any
	for _, id := range ids {
		if !slices.Contains(uniq, any(id)) {
			uniq = append(uniq, id)
		}
	}
	for len(uniq) > 0 {
		n := min(len(uniq), flushChunk)
		chunk := uniq[:n]
		uniq = uniq[n:]
		rows, err := tx.QueryContext(ctx, fmt.Sprintf(s.sqls.lockRowsRetention, placeholders(len(chunk))), chunk...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var c, f, x sql.NullInt64
			r, err := scanRow(rows, false, &c, &f, &x)
			if err != nil {
				rows.Close()
				return nil, err
			}
			out[r.ID] = r
			qs := e.settings[r.Queue]
			qs.Retention = backend.QueueRetention{Completed: backend.Retention(c.Int64), Failed: backend.Retention(f.Int64), Cancelled: backend.Retention(x.Int64)}
			e.settings[r.Queue] = qs
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// queryer is what *sql.DB, *sql.Tx and *sql.Conn have in common.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// queryRows runs a query of job rows, calling each for every row.
func (s *store) queryRows(ctx context.Context, q queryer, query string, args []any, withPayload bool, each func(*row)) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		r, err := scanRow(rows, withPayload)
		if err != nil {
			return err
		}
		each(r)
	}
	return rows.Err()
}

// live returns the row a lease names if the lease is live at now.
func live(rows map[string]*row, l backend.Lease, now time.Time) (*row, error) {
	r := rows[l.JobID]
	if r == nil {
		return nil, backend.ErrNotFound
	}
	if r.State != backend.StateActive || r.LeaseToken != l.Token || !now.Before(r.LeaseExpiresAt) {
		return nil, backend.ErrLeaseLost
	}
	return r, nil
}

// anyArgs turns strings into arguments.
func anyArgs(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
