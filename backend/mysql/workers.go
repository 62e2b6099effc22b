package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// RegisterWorker records or refreshes a worker's entry, keeping the
// command of the entry it replaces (unless that entry had expired), and
// returns that command. One transaction reads the old entry under a lock
// and writes the new one, so a CommandWorker racing the refresh is kept.
func (s *store) RegisterWorker(ctx context.Context, p backend.RegisterWorkerParams) (backend.RegisterWorkerResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.RegisterWorkerResult{}, err
	}
	defer s.end()
	w := p.Registered()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		old, err := s.lockWorker(ctx, tx, w.ID, p.Now)
		if err != nil {
			return err
		}
		if old != nil {
			w.Command = old.Command
		}
		return s.writeWorker(ctx, tx, w)
	})
	if err != nil {
		return backend.RegisterWorkerResult{}, s.wrap("register worker "+w.ID, err)
	}
	return backend.RegisterWorkerResult{Command: w.Command}, nil
}

// CommandWorker records a command on a worker's entry not expired at
// p.Now, keeping the stronger of the entry's command and p.Command.
func (s *store) CommandWorker(ctx context.Context, p backend.CommandWorkerParams) (backend.WorkerInfo, error) {
	if err := s.begin(ctx); err != nil {
		return backend.WorkerInfo{}, err
	}
	defer s.end()
	var w *backend.WorkerInfo
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		if w, err = s.lockWorker(ctx, tx, p.ID, p.Now); err != nil {
			return err
		}
		if w == nil {
			return backend.ErrWorkerNotFound
		}
		if cmd := w.Command.Stronger(p.Command); cmd != w.Command {
			w.Command = cmd
			return s.writeWorker(ctx, tx, w)
		}
		return nil
	})
	if err != nil {
		return backend.WorkerInfo{}, s.wrap("command worker "+p.ID, err)
	}
	w.Dead = !p.Now.Before(w.DeadAt)
	return *w, nil
}

// lockWorker reads the entry id under a lock held until tx ends: nil
// when there is none not expired at now.
func (s *store) lockWorker(ctx context.Context, tx *sql.Tx, id string, now time.Time) (*backend.WorkerInfo, error) {
	var expires int64
	var info string
	err := tx.QueryRowContext(ctx, `SELECT expires_at, info FROM `+s.table("workers")+` WHERE id = ? FOR UPDATE`, id).Scan(&expires, &info)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if expires <= micros(now) {
		return nil, nil
	}
	w, err := decodeWorkerInfo(info)
	if err != nil {
		return nil, err
	}
	return &w, nil
}

// writeWorker stores w as its id's entry.
func (s *store) writeWorker(ctx context.Context, tx *sql.Tx, w *backend.WorkerInfo) error {
	info, err := json.Marshal(w)
	if err != nil {
		return fmt.Errorf("encode worker entry: %w", err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO `+s.table("workers")+` (id, expires_at, info) VALUES (?, ?, ?)
		ON DUPLICATE KEY UPDATE expires_at = VALUES(expires_at), info = VALUES(info)`, w.ID, micros(w.ExpiresAt), string(info))
	return err
}

// decodeWorkerInfo reads an entry's JSON, its times in UTC.
func decodeWorkerInfo(info string) (backend.WorkerInfo, error) {
	var w backend.WorkerInfo
	if err := json.Unmarshal([]byte(info), &w); err != nil {
		return w, fmt.Errorf("%w: worker entry: %v", ErrCorrupt, err)
	}
	w.LastSeen, w.DeadAt, w.ExpiresAt, w.StartedAt = w.LastSeen.UTC(), w.DeadAt.UTC(), w.ExpiresAt.UTC(), w.StartedAt.UTC()
	for i := range w.Periodic {
		w.Periodic[i].LastRun, w.Periodic[i].NextRun = w.Periodic[i].LastRun.UTC(), w.Periodic[i].NextRun.UTC()
	}
	return w, nil
}

// DeregisterWorker removes a worker's entry.
func (s *store) DeregisterWorker(ctx context.Context, p backend.DeregisterWorkerParams) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	_, err := s.db.ExecContext(ctx, `DELETE FROM `+s.table("workers")+` WHERE id = ?`, p.ID)
	return s.wrap("deregister worker", err)
}

// Workers lists the worker entries not expired, by id.
func (s *store) Workers(ctx context.Context, p backend.WorkersParams) ([]backend.WorkerInfo, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	rows, err := s.db.QueryContext(ctx, `SELECT info FROM `+s.table("workers")+` WHERE expires_at > ? ORDER BY id`, micros(p.Now))
	if err != nil {
		return nil, s.wrap("workers", err)
	}
	defer rows.Close()
	var out []backend.WorkerInfo
	for rows.Next() {
		var info string
		if err := rows.Scan(&info); err != nil {
			return nil, s.wrap("workers", err)
		}
		w, err := decodeWorkerInfo(info)
		if err != nil {
			return nil, err
		}
		w.Dead = !p.Now.Before(w.DeadAt)
		out = append(out, w)
	}
	return out, s.wrap("workers", rows.Err())
}
