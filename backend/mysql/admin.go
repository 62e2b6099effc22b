package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// Get returns a job with its log lines, or backend.ErrNotFound.
func (s *store) Get(ctx context.Context, p backend.GetParams) (*backend.Job, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	if p.JID != "" {
		j, err := s.getBy(ctx, s.sqls.getJID, []byte(p.JID))
		return j, s.wrap("get", err)
	}
	j, err := s.get(ctx, p.ID)
	return j, s.wrap("get", err)
}

// get reads the job with id, with its log lines.
func (s *store) get(ctx context.Context, id string) (*backend.Job, error) {
	return s.getBy(ctx, s.sqls.get, id)
}

// getBy reads the job that query (get or getJID) finds by arg, with its
// log lines.
func (s *store) getBy(ctx context.Context, query string, arg any) (*backend.Job, error) {
	var j *backend.Job
	if err := s.queryRows(ctx, s.db, query, []any{arg}, true, func(r *row) { j = r.Job }); err != nil {
		return nil, err
	}
	if j == nil {
		return nil, backend.ErrNotFound
	}
	rows, err := s.db.QueryContext(ctx, s.sqls.getLogs, j.ID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var at int64
		var line string
		if err := rows.Scan(&at, &line); err != nil {
			return nil, err
		}
		j.Logs = append(j.Logs, backend.LogLine{At: fromMicros(at), Line: line})
	}
	return j, rows.Err()
}

// one runs fn on the locked row of one job in a transaction of its own
// (backend.ErrNotFound when there is none) and returns the job as it is
// after the commit.
func (s *store) one(ctx context.Context, op, id string, fn func(ctx context.Context, tx *sql.Tx, e *effects, r *row) error) (*backend.Job, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	var e *effects
	var job *backend.Job
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		e = s.newEffects()
		rows, err := s.lockRows(ctx, tx, []string{id}, true)
		if err != nil {
			return err
		}
		r := rows[id]
		if r == nil {
			return backend.ErrNotFound
		}
		job = r.Job
		if err := e.loadSettings(ctx, tx, []string{r.Queue}); err != nil {
			return err
		}
		if err := fn(ctx, tx, e, r); err != nil {
			return err
		}
		return e.flush(ctx, tx)
	})
	if err != nil {
		return nil, s.wrap(op, err)
	}
	e.announce()
	if j, err := s.get(ctx, id); err == nil {
		return j, nil
	}
	return job, nil
}

// Cancel cancels a waiting job, or asks an active one to stop.
func (s *store) Cancel(ctx context.Context, p backend.CancelParams) (*backend.Job, error) {
	return s.one(ctx, "cancel", p.ID, func(ctx context.Context, tx *sql.Tx, e *effects, r *row) error {
		switch r.State {
		case backend.StateScheduled, backend.StatePending, backend.StateRetry:
			e.cancelled(r, backend.CancelReasonRequested, p.Now)
		case backend.StateActive:
			r.CancelRequested = true
			e.changed(r)
		default:
			return &backend.StateError{Op: "cancel", ID: r.ID, State: r.State}
		}
		return nil
	})
}

// Retry sends a failed or cancelled job back to pending.
func (s *store) Retry(ctx context.Context, p backend.RetryParams) (*backend.Job, error) {
	return s.one(ctx, "retry", p.ID, func(ctx context.Context, tx *sql.Tx, e *effects, r *row) error {
		return s.retry(ctx, tx, e, r, p.Now)
	})
}

// retry sends r back to pending at now as backend.RetryParams says,
// taking its unique key again.
func (s *store) retry(ctx context.Context, tx *sql.Tx, e *effects, r *row, now time.Time) error {
	if r.State != backend.StateFailed && r.State != backend.StateCancelled {
		return &backend.StateError{Op: "retry", ID: r.ID, State: r.State}
	}
	if r.UniqueKey != "" && r.UniqueFor == 0 {
		holder, _, err := s.takeKey(ctx, tx, r.Job, now)
		if err != nil {
			return err
		}
		if holder != "" && holder != r.ID {
			return fmt.Errorf("kyu/mysql: retry of %s: key %q is held by %s: %w", r.ID, r.UniqueKey, holder, backend.ErrUniqueKeyHeld)
		}
	}
	r.MaxAttempts = max(r.MaxAttempts, r.Attempt+1)
	r.FinishedAt, r.ExpiresAt, r.Result, r.CancelReason, r.CancelRequested = time.Time{}, time.Time{}, nil, "", false
	r.hasResult = true
	if !r.Deadline.IsZero() && !r.Deadline.After(now) {
		r.Deadline = time.Time{}
	}
	e.pending(r, now)
	return nil
}

// RunNow makes a scheduled or retry job pending at once.
func (s *store) RunNow(ctx context.Context, p backend.RunNowParams) (*backend.Job, error) {
	return s.one(ctx, "run now", p.ID, func(ctx context.Context, tx *sql.Tx, e *effects, r *row) error {
		if r.State != backend.StateScheduled && r.State != backend.StateRetry {
			return &backend.StateError{Op: "run now", ID: r.ID, State: r.State}
		}
		e.pending(r, p.Now)
		return nil
	})
}

// Delete removes a job that is not active.
func (s *store) Delete(ctx context.Context, p backend.DeleteParams) error {
	_, err := s.one(ctx, "delete", p.ID, func(ctx context.Context, tx *sql.Tx, e *effects, r *row) error {
		if r.State == backend.StateActive {
			return backend.ErrJobActive
		}
		e.remove(r)
		return nil
	})
	if err != nil && errors.Is(err, backend.ErrJobActive) {
		return backend.ErrJobActive
	}
	return err
}

// inState reads and locks up to limit jobs of queue in state after the
// id after, oldest first, skipping rows others hold.
func (s *store) inState(ctx context.Context, tx *sql.Tx, queue string, state backend.State, after string, limit int) ([]*row, error) {
	var rows []*row
	// Final states are in jobs_final in id order; the others are few and
	// sorted from their range of jobs_claim.
	q := `SELECT ` + selectCols(false) + ` FROM ` + s.table("jobs") + ` j FORCE INDEX (jobs_claim)
		WHERE j.state = ? AND j.queue = ? AND j.id > ? ORDER BY j.id LIMIT ? FOR UPDATE SKIP LOCKED`
	if state.Final() {
		q = `SELECT ` + selectCols(false) + ` FROM ` + s.table("jobs") + ` j FORCE INDEX (jobs_final)
		WHERE j.final_state = ? AND j.queue = ? AND j.id > ? ORDER BY j.id LIMIT ? FOR UPDATE SKIP LOCKED`
	}
	err := s.queryRows(ctx, tx, q, []any{string(state), queue, after, limit}, false, func(r *row) { rows = append(rows, r) })
	return rows, err
}

// RetryQueue retries up to Limit jobs of a queue, oldest first, skipping
// those whose unique key another job holds.
func (s *store) RetryQueue(ctx context.Context, p backend.RetryQueueParams) (backend.CountResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.CountResult{}, err
	}
	defer s.end()
	var res backend.CountResult
	var e *effects
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res = backend.CountResult{}
		e = s.newEffects()
		if err := e.loadSettings(ctx, tx, []string{p.Queue}); err != nil {
			return err
		}
		after := ""
		for res.Count < p.Limit {
			rows, err := s.inState(ctx, tx, p.Queue, p.State, after, p.Limit-res.Count)
			if err != nil {
				return err
			}
			for _, r := range rows {
				after = r.ID
				err := s.retry(ctx, tx, e, r, p.Now)
				if errors.Is(err, backend.ErrUniqueKeyHeld) {
					continue
				}
				if err != nil {
					return err
				}
				res.Count++
			}
			if len(rows) < p.Limit-res.Count || len(rows) == 0 {
				break
			}
		}
		return e.flush(ctx, tx)
	})
	if err != nil {
		return backend.CountResult{}, s.wrap("retry queue", err)
	}
	e.announce()
	return res, nil
}

// Purge deletes up to Limit jobs of a queue in one state, oldest first.
func (s *store) Purge(ctx context.Context, p backend.PurgeParams) (backend.CountResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.CountResult{}, err
	}
	defer s.end()
	var res backend.CountResult
	var e *effects
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res = backend.CountResult{}
		e = s.newEffects()
		rows, err := s.inState(ctx, tx, p.Queue, p.State, "", p.Limit)
		if err != nil {
			return err
		}
		for _, r := range rows {
			e.remove(r)
			res.Count++
		}
		return e.flush(ctx, tx)
	})
	if err != nil {
		return backend.CountResult{}, s.wrap("purge", err)
	}
	e.announce()
	return res, nil
}

// UpdateQueue changes a queue's settings; resuming a queue that holds
// pending jobs wakes its subscribers.
func (s *store) UpdateQueue(ctx context.Context, p backend.UpdateQueueParams) (backend.QueueSettings, error) {
	if err := s.begin(ctx); err != nil {
		return backend.QueueSettings{}, err
	}
	defer s.end()
	var qs backend.QueueSettings
	var wake bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		qs, wake = backend.QueueSettings{}, false
		var c, f, x int64
		err := tx.QueryRowContext(ctx, `SELECT paused, retain_completed, retain_failed, retain_cancelled FROM `+s.table("queues")+
			` WHERE name = ? FOR UPDATE`, p.Queue).Scan(&qs.Paused, &c, &f, &x)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		qs.Retention = backend.QueueRetention{Completed: backend.Retention(c), Failed: backend.Retention(f), Cancelled: backend.Retention(x)}
		wasPaused := qs.Paused
		if p.Paused != nil {
			qs.Paused = *p.Paused
		}
		if p.Retention != nil {
			qs.Retention = *p.Retention
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO `+s.table("queues")+` (name, paused, retain_completed, retain_failed, retain_cancelled)
			VALUES (?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE paused = VALUES(paused), retain_completed = VALUES(retain_completed),
			retain_failed = VALUES(retain_failed), retain_cancelled = VALUES(retain_cancelled)`,
			p.Queue, qs.Paused, int64(qs.Retention.Completed), int64(qs.Retention.Failed), int64(qs.Retention.Cancelled))
		if err != nil {
			return err
		}
		if wasPaused && !qs.Paused {
			var one int
			err := tx.QueryRowContext(ctx, `SELECT 1 FROM `+s.table("jobs")+` WHERE state = 'pending' AND queue = ? LIMIT 1`, p.Queue).Scan(&one)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			wake = err == nil
		}
		return nil
	})
	if err != nil {
		return backend.QueueSettings{}, s.wrap("update queue", err)
	}
	if wake {
		s.signals.wake([]string{p.Queue})
	}
	return qs, nil
}
