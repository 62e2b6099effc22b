package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// leaseIDs lists the job ids of leases.
func leaseIDs(leases []backend.Lease) []string {
	ids := make([]string, len(leases))
	for i, l := range leases {
		ids[i] = l.JobID
	}
	return ids
}

// Heartbeat extends the live leases of a batch in one statement.
func (s *store) Heartbeat(ctx context.Context, p backend.HeartbeatParams) (backend.HeartbeatResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.HeartbeatResult{}, err
	}
	defer s.end()
	var res backend.HeartbeatResult
	expires := p.Now.Add(p.Extend)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res = backend.HeartbeatResult{Leases: make([]backend.LeaseStatus, len(p.Leases))}
		rows, err := s.lockRows(ctx, tx, leaseIDs(p.Leases), false)
		if err != nil {
			return err
		}
		var ids []any
		for i, l := range p.Leases {
			r, err := live(rows, l, p.Now)
			if err != nil {
				res.Leases[i] = backend.LeaseStatus{Lost: true}
				continue
			}
			ids = append(ids, r.ID)
			res.Leases[i] = backend.LeaseStatus{ExpiresAt: expires, CancelRequested: r.CancelRequested}
		}
		if len(ids) == 0 {
			return nil
		}
		_, err = tx.ExecContext(ctx, fmt.Sprintf(s.sqls.extend, placeholders(len(ids))), append([]any{micros(expires)}, ids...)...)
		return err
	})
	if err != nil {
		return backend.HeartbeatResult{}, s.wrap("heartbeat", err)
	}
	var lost []string
	for i, l := range res.Leases {
		if l.Lost {
			lost = append(lost, p.Leases[i].JobID)
		}
	}
	s.claimed.forget(lost)
	return res, nil
}

// batch runs one lease operation over a batch: it locks the rows, loads
// their queues' settings, calls each for every item with its row (or the
// item's error), writes the effects and announces them after the commit.
func (s *store) batch(ctx context.Context, op string, ids []string, now time.Time, each func(e *effects, rows map[string]*row, i int) error) (backend.BatchResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.BatchResult{}, err
	}
	defer s.end()
	var res backend.BatchResult
	var e *effects
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res = backend.BatchResult{Errors: make([]error, len(ids))}
		e = s.newEffects()
		rows, err := s.lockRowsSettings(ctx, tx, e, ids)
		if err != nil {
			return err
		}
		for i := range ids {
			res.Errors[i] = each(e, rows, i)
		}
		return e.flush(ctx, tx)
	})
	if err != nil {
		return backend.BatchResult{}, s.wrap(op, err)
	}
	e.announce()
	return res, nil
}

// Complete finishes jobs under live leases, storing their results. A
// batch of distinct jobs without results goes first through one UPDATE
// that checks every lease itself (leanComplete); when it does not act on
// every item, it is rolled back and the batch takes the general path.
func (s *store) Complete(ctx context.Context, p backend.CompleteParams) (backend.BatchResult, error) {
	ids := make([]string, len(p.Items))
	for i, it := range p.Items {
		ids[i] = it.Lease.JobID
	}
	if ok, err := s.leanComplete(ctx, p); ok || err != nil {
		if err != nil {
			return backend.BatchResult{}, s.wrap("complete", err)
		}
		return backend.BatchResult{Errors: make([]error, len(p.Items))}, nil
	}
	defer s.claimed.forget(ids)
	return s.batch(ctx, "complete", ids, p.Now, func(e *effects, rows map[string]*row, i int) error {
		it := p.Items[i]
		r, err := live(rows, it.Lease, p.Now)
		if err != nil {
			return err
		}
		r.Result = append([]byte(nil), it.Result...)
		if len(it.Result) == 0 {
			r.Result = nil
		}
		r.hasResult = true
		e.count(r.Queue, p.Now, false)
		if r.CancelRequested {
			e.cancelled(r, backend.CancelReasonRequested, p.Now)
		} else {
			e.finish(r, backend.StateCompleted, p.Now)
			if len(r.Result) == 0 {
				e.finishedAt = micros(p.Now)
				e.completedPlainly(r)
			}
		}
		return nil
	})
}

// Fail ends attempts with an error.
func (s *store) Fail(ctx context.Context, p backend.FailParams) (backend.BatchResult, error) {
	ids := make([]string, len(p.Items))
	for i, it := range p.Items {
		ids[i] = it.Lease.JobID
	}
	defer s.claimed.forget(ids)
	return s.batch(ctx, "fail", ids, p.Now, func(e *effects, rows map[string]*row, i int) error {
		it := p.Items[i]
		r, err := live(rows, it.Lease, p.Now)
		if err != nil {
			return err
		}
		kind := backend.AttemptFailed
		if it.Cancel {
			kind = backend.AttemptCancelled
		}
		r.Errors = append(r.Errors, backend.AttemptError{Attempt: r.Attempt, At: p.Now, Kind: kind, Message: it.Message, Stack: it.Stack})
		r.LeaseExpiresAt, r.WorkerID = time.Time{}, ""
		e.count(r.Queue, p.Now, true)
		switch {
		case it.Cancel:
			e.cancelled(r, backend.CancelReasonHandler, p.Now)
		case r.CancelRequested:
			e.cancelled(r, backend.CancelReasonRequested, p.Now)
		case it.Final || r.Attempt >= r.MaxAttempts:
			e.finish(r, backend.StateFailed, p.Now)
		case it.RetryAt.After(p.Now):
			r.State, r.RunAt = backend.StateRetry, it.RetryAt
			e.changed(r)
		default:
			e.pending(r, p.Now)
		}
		return nil
	})
}

// Release hands active jobs back to pending at once.
func (s *store) Release(ctx context.Context, p backend.ReleaseParams) (backend.BatchResult, error) {
	defer s.claimed.forget(leaseIDs(p.Leases))
	return s.batch(ctx, "release", leaseIDs(p.Leases), p.Now, func(e *effects, rows map[string]*row, i int) error {
		r, err := live(rows, p.Leases[i], p.Now)
		if err != nil {
			return err
		}
		r.Errors = append(r.Errors, backend.AttemptError{Attempt: r.Attempt, At: p.Now, Kind: backend.AttemptInterrupted, Message: "released"})
		r.Attempt--
		r.LeaseExpiresAt, r.WorkerID = time.Time{}, ""
		if r.CancelRequested {
			e.cancelled(r, backend.CancelReasonRequested, p.Now)
		} else {
			e.pending(r, r.RunAt)
		}
		return nil
	})
}

// Report records progress and log lines of active jobs.
func (s *store) Report(ctx context.Context, p backend.ReportParams) (backend.BatchResult, error) {
	ids := make([]string, len(p.Items))
	for i, it := range p.Items {
		ids[i] = it.Lease.JobID
	}
	return s.batch(ctx, "report", ids, p.Now, func(e *effects, rows map[string]*row, i int) error {
		it := p.Items[i]
		r, err := live(rows, it.Lease, p.Now)
		if err != nil {
			return err
		}
		if it.Progress != nil {
			pr := *it.Progress
			pr.At = p.Now
			r.Progress = &pr
		}
		for _, l := range it.Logs {
			if r.logCount < p.MaxLines() {
				e.lines = append(e.lines, r.ID, r.logCount, micros(p.Now), l)
				r.logCount++
			} else {
				r.LogsDropped++
			}
		}
		e.changed(r)
		return nil
	})
}

// insertLines is the statement that appends log lines: %s rows of (job
// id, seq, at, line).
func (s *store) insertLines(n int) string {
	return `INSERT INTO ` + s.table("job_logs") + ` (job_id, seq, at, line) VALUES ` +
		strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?), ", n), ", ")
}

// errNotLean rolls back a lean completion that did not act on every item.
var errNotLean = errors.New("kyu/mysql: not every item is a plain completion")

// leanComplete completes, in one UPDATE, a batch whose every item is a
// live lease of a distinct job with no result, no cancel requested and a
// retention that keeps them; ok reports that it did. Otherwise it changes
// nothing (ok false, err nil) and the caller takes the general path.
//
// When the store claimed every job of the batch, it knows their queues:
// the counts go in with the UPDATE, in one round trip, and the UPDATE
// checks the queues. Otherwise the counts read the queues from the rows.
func (s *store) leanComplete(ctx context.Context, p backend.CompleteParams) (ok bool, err error) {
	if len(p.Items) == 0 || len(p.Items) > flushChunk {
		return false, nil
	}
	seen := make(map[string]bool, len(p.Items))
	ids := make([]string, 0, len(p.Items))
	for _, it := range p.Items {
		if len(it.Result) > 0 || seen[it.Lease.JobID] {
			return false, nil
		}
		seen[it.Lease.JobID] = true
		ids = append(ids, it.Lease.JobID)
	}
	queues, known := s.claimed.lookup(ids)
	now := micros(p.Now)
	args := []any{now, now, now, now, now}
	for _, id := range ids {
		args = append(args, id)
	}
	args = append(args, now)
	var tokens strings.Builder
	for _, it := range p.Items {
		tokens.WriteString("WHEN ? THEN ? ")
		args = append(args, it.Lease.JobID, it.Lease.Token)
	}
	queueCheck := ""
	if known {
		var qargs []any
		queueCheck, qargs = queueCheckOf(ids, queues)
		args = append(args, qargs...)
	}
	update := fmt.Sprintf(s.sqls.completeLean, placeholders(len(ids)), tokens.String(), queueCheck)
	minute := backend.MinuteOf(p.Now).UnixMicro()
	// Two round trips: one begins the transaction and runs the UPDATE
	// (with the counts, when the queues are known); the other commits
	// (after the counts, when they are not).
	err = s.inConnTx(ctx, func(c *sql.Conn) error {
		if known {
			// The counts first and the UPDATE last: the result's count is
			// the UPDATE's, and a shortfall rolls the counts back with it.
			counts, cargs := s.leanCounts(queues, minute)
			res, err := c.ExecContext(ctx, beginTx+counts+"; "+update, append(cargs, args...)...)
			if err != nil {
				return err
			}
			if err := allAffected(res, len(ids)); err != nil {
				return err
			}
			_, err = c.ExecContext(ctx, "COMMIT")
			return err
		}
		res, err := c.ExecContext(ctx, beginTx+update, args...)
		if err != nil {
			return err
		}
		if err := allAffected(res, len(ids)); err != nil {
			return err
		}
		in := placeholders(len(ids))
		idArgs := anyArgs(ids)
		counts := fmt.Sprintf(s.sqls.countLean, in) + "; " + fmt.Sprintf(s.sqls.countQueueLean, in) + "; " +
			fmt.Sprintf(s.sqls.count, "(?, ?, ?, 0)")
		cargs := append(append(append([]any{rand.IntN(8)}, idArgs...), minute, rand.IntN(8)), idArgs...)
		cargs = append(cargs, minute, rand.IntN(8), len(ids))
		_, err = c.ExecContext(ctx, counts+commitTx, cargs...)
		return err
	})
	if errors.Is(err, errNotLean) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	s.claimed.forget(ids)
	s.watches.ended(ids)
	s.leanCompletes.Add(1)
	return true, nil
}

// allAffected returns errNotLean unless res changed n rows.
func allAffected(res sql.Result, n int) error {
	got, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if int(got) != n {
		return errNotLean
	}
	return nil
}

// queueCheckOf is the condition by which the lean UPDATE checks that each
// row is in the queue the store remembers for it, with its arguments.
func queueCheckOf(ids, queues []string) (string, []any) {
	one := true
	for _, q := range queues {
		one = one && q == queues[0]
	}
	if one {
		return " AND queue = ?", []any{queues[0]}
	}
	var b strings.Builder
	args := make([]any, 0, 2*len(ids))
	b.WriteString(" AND queue = CASE id ")
	for i, id := range ids {
		b.WriteString("WHEN ? THEN ? ")
		args = append(args, id, queues[i])
	}
	b.WriteString("END")
	return b.String(), args
}

// leanCounts builds the statements that count a lean completion of jobs
// of the given queues at minute: completed jobs per queue, ended attempts
// per queue and minute, and store-wide; rows in key order, so that two
// transactions take their locks in the same order.
func (s *store) leanCounts(queues []string, minute int64) (string, []any) {
	per := map[string]int64{}
	for _, q := range queues {
		per[q]++
	}
	names := slices.Sorted(maps.Keys(per))
	vals := make([]string, len(names))
	var final, queue []any
	fshard, qshard := rand.IntN(8), rand.IntN(8)
	for i, q := range names {
		vals[i] = "(?, ?, ?, ?)"
		final = append(final, q, string(backend.StateCompleted), fshard, per[q])
		queue = append(queue, q, minute, qshard, per[q])
	}
	qvals := strings.ReplaceAll(strings.Join(vals, ", "), "(?, ?, ?, ?)", "(?, ?, ?, ?, 0)")
	q := fmt.Sprintf(s.sqls.countFinal, strings.Join(vals, ", ")) + "; " +
		fmt.Sprintf(s.sqls.countQueue, qvals) + "; " +
		fmt.Sprintf(s.sqls.count, "(?, ?, ?, 0)")
	args := append(append(final, queue...), minute, rand.IntN(8), len(queues))
	return q, args
}
