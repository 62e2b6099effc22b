package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kyuhq/kyu/backend"
)

// lockedJob is what the admin operations read of a job whose row they hold.
type lockedJob struct {
	id              string
	state           backend.State
	queue           string
	retention       backend.Retention
	cancelRequested bool
	watched         bool
	uniqueKey       string
	uniqueFor       int64
}

// lockJob reads and locks the job id in tx; ErrNotFound when there is none.
func (s *store) lockJob(ctx context.Context, tx pgx.Tx, id string) (*lockedJob, error) {
	j := &lockedJob{id: id}
	var state string
	var retention int64
	err := tx.QueryRow(ctx, s.sqls.lockJob, id).Scan(&state, &j.queue, &retention, &j.cancelRequested, &j.watched, &j.uniqueKey, &j.uniqueFor)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, backend.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	j.state, j.retention = backend.State(state), backend.Retention(retention)
	if !j.state.Valid() {
		return nil, fmt.Errorf("%w: job %s: state: unknown state %q", ErrCorrupt, id, state)
	}
	return j, nil
}

// queueRetention reads a queue's retention overrides (zero without
// settings).
func (s *store) queueRetention(ctx context.Context, tx pgx.Tx, queue string) (backend.QueueRetention, error) {
	var c, f, x int64
	err := tx.QueryRow(ctx, s.sqls.queueRetention, queue).Scan(&c, &f, &x)
	if errors.Is(err, pgx.ErrNoRows) {
		return backend.QueueRetention{}, nil
	}
	if err != nil {
		return backend.QueueRetention{}, err
	}
	return backend.QueueRetention{Completed: backend.Retention(c), Failed: backend.Retention(f), Cancelled: backend.Retention(x)}, nil
}

// parseID turns a job id into its canonical form; ErrNotFound when it is
// no job id at all.
func parseID(id string) (string, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return "", backend.ErrNotFound
	}
	return u.String(), nil
}

// beginJobCall starts a call on one job: it enters the store (the caller
// defers s.end() when err is nil) and gives the job id in its canonical
// form.
func (s *store) beginJobCall(ctx context.Context, now time.Time, rawID string) (string, error) {
	if err := s.begin(ctx); err != nil {
		return "", err
	}
	id, err := parseID(rawID)
	if err != nil {
		s.end()
		return "", err
	}
	return id, nil
}

// Cancel cancels a waiting job at once (deciding its expiry with
// backend.Expiry, deleting it under RetainNone) or records the request on
// an active one, in one transaction holding the job's row.
func (s *store) Cancel(ctx context.Context, p backend.CancelParams) (*backend.Job, error) {
	id, err := s.beginJobCall(ctx, p.Now, p.ID)
	if err != nil {
		return nil, err
	}
	defer s.end()
	var job *backend.Job
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		lj, err := s.lockJob(ctx, tx, id)
		if err != nil {
			return err
		}
		switch lj.state {
		case backend.StateScheduled, backend.StatePending, backend.StateRetry:
			qr, err := s.queueRetention(ctx, tx, lj.queue)
			if err != nil {
				return err
			}
			at, del := backend.Expiry(lj.retention, qr, backend.StateCancelled, p.Now, false)
			if job, err = scanJob(tx.QueryRow(ctx, s.sqls.finishWaiting, p.Now, id, nullTime(at))); err != nil {
				return err
			}
			if del {
				// The delete notifies a watcher itself.
				_, err = tx.Exec(ctx, s.sqls.delete, id)
				return err
			}
			return s.notifyFinished(ctx, tx, lj)
		case backend.StateActive:
			if lj.cancelRequested {
				job, err = scanJobLogs(tx.QueryRow(ctx, s.sqls.get, id), true)
				return err
			}
			job, err = scanJob(tx.QueryRow(ctx, s.sqls.requestCancel, id))
			return err
		}
		return &backend.StateError{Op: "cancel", ID: id, State: lj.state}
	})
	if err != nil {
		return nil, s.wrap("cancel "+p.ID, err)
	}
	return job, nil
}

// notifyFinished announces in tx that a watched job ended.
func (s *store) notifyFinished(ctx context.Context, tx pgx.Tx, lj *lockedJob) error {
	if !lj.watched {
		return nil
	}
	_, err := tx.Exec(ctx, s.sqls.notifyFinished, s.finished, lj.id)
	return err
}

// takeKeyAgain gives a retried job its unique key back (a key without a
// UniqueFor period), or says which job holds it.
func (s *store) takeKeyAgain(ctx context.Context, tx pgx.Tx, lj *lockedJob, now pgtype.Timestamptz) error {
	if lj.uniqueKey == "" || lj.uniqueFor != 0 {
		return nil
	}
	var holder pgtype.Text
	if err := tx.QueryRow(ctx, s.sqls.takeKey, lj.queue, lj.uniqueKey, lj.id, now).Scan(&holder); err != nil {
		return err
	}
	if holder.Valid && holder.String != lj.id {
		return fmt.Errorf("kyu/postgres: retry of %s: unique key %q of queue %s is held by job %s: %w",
			lj.id, lj.uniqueKey, lj.queue, holder.String, backend.ErrUniqueKeyHeld)
	}
	return nil
}

// Retry sends a failed or cancelled job back to pending, taking its unique
// key again, in one transaction.
func (s *store) Retry(ctx context.Context, p backend.RetryParams) (*backend.Job, error) {
	id, err := s.beginJobCall(ctx, p.Now, p.ID)
	if err != nil {
		return nil, err
	}
	defer s.end()
	var job *backend.Job
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		lj, err := s.lockJob(ctx, tx, id)
		if err != nil {
			return err
		}
		if lj.state != backend.StateFailed && lj.state != backend.StateCancelled {
			return &backend.StateError{Op: "retry", ID: id, State: lj.state}
		}
		if err := s.takeKeyAgain(ctx, tx, lj, nullTime(p.Now)); err != nil {
			return err
		}
		job, err = scanJob(tx.QueryRow(ctx, s.sqls.retry, []string{id}, p.Now))
		return err
	})
	if err != nil {
		return nil, s.wrap("retry "+p.ID, err)
	}
	s.wakeQueue(job.Queue)
	return job, nil
}

// RunNow makes a scheduled or retry job pending at once.
func (s *store) RunNow(ctx context.Context, p backend.RunNowParams) (*backend.Job, error) {
	id, err := s.beginJobCall(ctx, p.Now, p.ID)
	if err != nil {
		return nil, err
	}
	defer s.end()
	job, err := scanJob(s.pool.QueryRow(ctx, s.sqls.runNow, id, p.Now))
	if errors.Is(err, pgx.ErrNoRows) {
		var state string
		err = s.pool.QueryRow(ctx, s.sqls.state, id).Scan(&state)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil, backend.ErrNotFound
		case err == nil:
			return nil, &backend.StateError{Op: "run now", ID: id, State: backend.State(state)}
		}
	}
	if err != nil {
		return nil, s.wrap("run now "+p.ID, err)
	}
	s.wakeQueue(job.Queue)
	return job, nil
}

// RetryQueue retries up to p.Limit jobs of a queue in one transaction,
// oldest first. Jobs that take a unique key again are retried one by one
// (so two of them with one key cannot both take it); the others together.
func (s *store) RetryQueue(ctx context.Context, p backend.RetryQueueParams) (backend.CountResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.CountResult{}, err
	}
	defer s.end()
	count := 0
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		after := uuid.Nil.String()
		for count < p.Limit {
			want := p.Limit - count
			cands, err := s.retryCandidates(ctx, tx, p.Queue, p.State, after, want)
			if err != nil {
				return err
			}
			var plain []string
			for _, c := range cands {
				after = c.id
				if c.uniqueKey == "" || c.uniqueFor != 0 {
					plain = append(plain, c.id)
					continue
				}
				err := s.takeKeyAgain(ctx, tx, c, nullTime(p.Now))
				if errors.Is(err, backend.ErrUniqueKeyHeld) {
					continue
				}
				if err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, s.sqls.retry, []string{c.id}, p.Now); err != nil {
					return err
				}
				count++
			}
			if len(plain) > 0 {
				tag, err := tx.Exec(ctx, s.sqls.retry, plain, p.Now)
				if err != nil {
					return err
				}
				count += int(tag.RowsAffected())
			}
			if len(cands) < want {
				break
			}
		}
		return nil
	})
	if err != nil {
		return backend.CountResult{}, s.wrap("retry queue "+p.Queue, err)
	}
	if count > 0 {
		s.wakeQueue(p.Queue)
	}
	return backend.CountResult{Count: count}, nil
}

// retryCandidates reads and locks up to limit jobs of a queue in a state
// after the id after, in id order.
func (s *store) retryCandidates(ctx context.Context, tx pgx.Tx, queue string, state backend.State, after string, limit int) ([]*lockedJob, error) {
	rows, err := tx.Query(ctx, s.sqls.retryCandidates[state], queue, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*lockedJob
	for rows.Next() {
		c := &lockedJob{queue: queue, state: state}
		if err := rows.Scan(&c.id, &c.uniqueKey, &c.uniqueFor); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Purge deletes up to p.Limit jobs of a queue in one state, oldest first,
// in one statement.
func (s *store) Purge(ctx context.Context, p backend.PurgeParams) (backend.CountResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.CountResult{}, err
	}
	defer s.end()
	var n int64
	if err := s.pool.QueryRow(ctx, s.sqls.purge[p.State], p.Queue, p.Limit).Scan(&n); err != nil {
		return backend.CountResult{}, s.wrap("purge "+p.Queue, err)
	}
	return backend.CountResult{Count: int(n)}, nil
}

// UpdateQueue changes a queue's settings in one statement; resuming a
// paused queue wakes its subscribers.
func (s *store) UpdateQueue(ctx context.Context, p backend.UpdateQueueParams) (backend.QueueSettings, error) {
	if err := s.begin(ctx); err != nil {
		return backend.QueueSettings{}, err
	}
	defer s.end()
	var paused pgtype.Bool
	if p.Paused != nil {
		paused = pgtype.Bool{Bool: *p.Paused, Valid: true}
	}
	var rc, rf, rx pgtype.Int8
	if r := p.Retention; r != nil {
		rc = pgtype.Int8{Int64: int64(r.Completed), Valid: true}
		rf = pgtype.Int8{Int64: int64(r.Failed), Valid: true}
		rx = pgtype.Int8{Int64: int64(r.Cancelled), Valid: true}
	}
	var qs backend.QueueSettings
	var c, f, x int64
	var was bool
	if err := s.pool.QueryRow(ctx, s.sqls.updateQueue, p.Queue, paused, rc, rf, rx).Scan(&qs.Paused, &c, &f, &x, &was); err != nil {
		return backend.QueueSettings{}, s.wrap("update queue "+p.Queue, err)
	}
	qs.Retention = backend.QueueRetention{Completed: backend.Retention(c), Failed: backend.Retention(f), Cancelled: backend.Retention(x)}
	if was && !qs.Paused {
		s.wakeQueue(p.Queue)
	}
	return qs, nil
}
