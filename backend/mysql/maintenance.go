package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// limitOf is a maintenance step's bound: p.Limit, or the store's own.
func (s *store) limitOf(p backend.MaintenanceParams) int {
	if p.Limit > 0 {
		return p.Limit
	}
	return s.opts.MaintenanceLimit
}

// Promote moves due scheduled and retry jobs to pending and cancels waiting
// jobs past their deadline, at most the step's limit in all.
func (s *store) Promote(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.MaintenanceResult{}, err
	}
	defer s.end()
	var res backend.MaintenanceResult
	var e *effects
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		e = s.newEffects()
		var err error
		if res, err = s.step(ctx, tx, e, p.Now, nil, s.limitOf(p)); err != nil {
			return err
		}
		return e.flush(ctx, tx)
	})
	if err != nil {
		return backend.MaintenanceResult{}, s.wrap("promote", err)
	}
	e.announce()
	return res, nil
}

// step promotes and cancels as Promote does, in the given queues only
// (every queue when nil), in tx; the caller flushes e.
func (s *store) step(ctx context.Context, tx queryer, e *effects, now time.Time, queues []string, limit int) (backend.MaintenanceResult, error) {
	if queues != nil {
		// A claim's step: most find nothing to do, in one probe that
		// locks nothing.
		var due bool
		probe, pargs := s.probe(now, queues)
		if err := tx.QueryRowContext(ctx, probe, pargs...).Scan(&due); err != nil {
			return backend.MaintenanceResult{}, err
		}
		if !due {
			return backend.MaintenanceResult{}, nil
		}
	}
	return s.stepDue(ctx, tx, e, now, queues, limit)
}

// probe is the query that tells whether queues hold jobs due for a
// maintenance step at now, with its arguments.
func (s *store) probe(now time.Time, queues []string) (string, []any) {
	return `SELECT EXISTS (SELECT 1 FROM ` + s.table("jobs") + ` j FORCE INDEX (jobs_timer)
		WHERE j.timer_at <= ? AND j.queue IN ` + placeholders(len(queues)) + `)`, append([]any{micros(now)}, anyArgs(queues)...)
}

// stepDue is step without the probe.
func (s *store) stepDue(ctx context.Context, tx queryer, e *effects, now time.Time, queues []string, limit int) (backend.MaintenanceResult, error) {
	var res backend.MaintenanceResult
	inQueues, qargs := "", []any{}
	if queues != nil {
		inQueues = " AND j.queue IN " + placeholders(len(queues))
		qargs = anyArgs(queues)
	}
	n := micros(now)
	var rows []*row
	due := `SELECT ` + selectCols(false) + ` FROM ` + s.table("jobs") + ` j FORCE INDEX (jobs_timer)
		WHERE j.timer_at <= ?` + inQueues + ` ORDER BY j.timer_at LIMIT ? FOR UPDATE SKIP LOCKED`
	if err := s.queryRows(ctx, tx, due, append(append([]any{n}, qargs...), limit), false, func(r *row) { rows = append(rows, r) }); err != nil {
		return res, err
	}
	if len(rows) == 0 {
		return res, nil
	}
	if err := e.loadSettings(ctx, tx, queuesOfRows(rows)); err != nil {
		return res, err
	}
	for _, r := range rows {
		if res.Moved+res.Cancelled >= limit {
			break
		}
		switch {
		case !r.Deadline.IsZero() && !now.Before(r.Deadline):
			e.cancelled(r, backend.CancelReasonDeadline, now)
			res.Cancelled++
		case r.State != backend.StatePending && !now.Before(r.RunAt):
			e.pending(r, r.RunAt)
			res.Moved++
		}
	}
	return res, nil
}

// RecoverLeases ends expired leases, oldest first.
func (s *store) RecoverLeases(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.MaintenanceResult{}, err
	}
	defer s.end()
	var res backend.MaintenanceResult
	var e *effects
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res = backend.MaintenanceResult{}
		e = s.newEffects()
		var rows []*row
		q := `SELECT ` + selectCols(false) + ` FROM ` + s.table("jobs") + ` j FORCE INDEX (jobs_lease)
			WHERE j.lease_expires_at <= ? AND j.state = 'active' ORDER BY j.lease_expires_at LIMIT ? FOR UPDATE SKIP LOCKED`
		if err := s.queryRows(ctx, tx, q, []any{micros(p.Now), s.limitOf(p)}, false, func(r *row) { rows = append(rows, r) }); err != nil {
			return err
		}
		if err := e.loadSettings(ctx, tx, queuesOfRows(rows)); err != nil {
			return err
		}
		for _, r := range rows {
			r.Errors = append(r.Errors, backend.AttemptError{Attempt: r.Attempt, At: p.Now, Kind: backend.AttemptLeaseExpired, Message: "lease expired"})
			r.LeaseExpiresAt, r.WorkerID = time.Time{}, ""
			res.Moved++
			e.count(r.Queue, p.Now, true)
			switch {
			case r.CancelRequested:
				e.cancelled(r, backend.CancelReasonRequested, p.Now)
			case r.Attempt >= r.MaxAttempts:
				res.Failed++
				e.finish(r, backend.StateFailed, p.Now)
			default:
				e.pending(r, r.RunAt)
			}
		}
		return e.flush(ctx, tx)
	})
	if err != nil {
		return backend.MaintenanceResult{}, s.wrap("recover leases", err)
	}
	e.announce()
	return res, nil
}

// ApplyRetention deletes final jobs whose retention has run out, in
// batches of at most the step's limit, and forgets expired unique keys,
// expired workers, old per-minute counters (folded into the totals) and
// per-queue counters older than backend.QueueStatsHistory.
func (s *store) ApplyRetention(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.MaintenanceResult{}, err
	}
	defer s.end()
	var res backend.MaintenanceResult
	var e *effects
	limit := s.limitOf(p)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res = backend.MaintenanceResult{}
		e = s.newEffects()
		q := `SELECT ` + selectCols(false) + ` FROM ` + s.table("jobs") + ` j FORCE INDEX (jobs_expires)
			WHERE j.expires_at <= ? ORDER BY j.expires_at LIMIT ? FOR UPDATE SKIP LOCKED`
		if err := s.queryRows(ctx, tx, q, []any{micros(p.Now), limit}, false, func(r *row) {
			if r.State.Final() {
				e.remove(r)
				res.Moved++
			}
		}); err != nil {
			return err
		}
		return e.flush(ctx, tx)
	})
	if err != nil {
		return backend.MaintenanceResult{}, s.wrap("apply retention", err)
	}
	e.announce()
	n := micros(p.Now)
	if _, err := s.db.ExecContext(ctx, `DELETE FROM `+s.table("unique_keys")+` WHERE held_until <= ? LIMIT ?`, n, limit); err != nil {
		return res, s.wrap("apply retention: forget unique keys", err)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM `+s.table("workers")+` WHERE expires_at <= ? LIMIT ?`, n, limit); err != nil {
		return res, s.wrap("apply retention: forget workers", err)
	}
	if err := s.foldMinutes(ctx, backend.MinuteOf(p.Now.Add(-backend.StatsHistory))); err != nil {
		return res, s.wrap("apply retention: fold counters", err)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM `+s.table("queue_counters")+` WHERE minute < ? LIMIT ?`,
		micros(backend.MinuteOf(p.Now.Add(-backend.QueueStatsHistory))), limit); err != nil {
		return res, s.wrap("apply retention: drop old queue counters", err)
	}
	return res, nil
}

// totalsMinute is the counters' row of the totals folded from old minutes.
const totalsMinute = -1

// foldMinutes adds the counters of minutes before first to the totals row
// and deletes them.
func (s *store) foldMinutes(ctx context.Context, first time.Time) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var processed, failed sql.NullInt64
		f := micros(first)
		err := tx.QueryRowContext(ctx, `SELECT sum(processed), sum(failed) FROM `+s.table("counters")+
			` WHERE minute >= 0 AND minute < ? FOR UPDATE`, f).Scan(&processed, &failed)
		if err != nil || !processed.Valid {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+s.table("counters")+` WHERE minute >= 0 AND minute < ?`, f); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, fmt.Sprintf(s.sqls.count, "(?, 0, ?, ?)"), totalsMinute, processed.Int64, failed.Int64)
		return err
	})
}

// queuesOfRows lists the queues of rows.
func queuesOfRows(rows []*row) []string {
	var qs []string
	for _, r := range rows {
		if !containsString(qs, r.Queue) {
			qs = append(qs, r.Queue)
		}
	}
	return qs
}
