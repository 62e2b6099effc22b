package mysql

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kyuhq/kyu/backend"
)

// RegisterWorker records or refreshes a worker's entry.
func (s *store) RegisterWorker(ctx context.Context, p backend.RegisterWorkerParams) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	w := p.Registered()
	info, err := json.Marshal(w)
	if err != nil {
		return fmt.Errorf("kyu/mysql: register worker: %w", err)
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO `+s.table("workers")+` (id, expires_at, info) VALUES (?, ?, ?)
		ON DUPLICATE KEY UPDATE expires_at = VALUES(expires_at), info = VALUES(info)`, w.ID, micros(w.ExpiresAt), string(info))
	return s.wrap("register worker", err)
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
		var w backend.WorkerInfo
		if err := json.Unmarshal([]byte(info), &w); err != nil {
			return nil, fmt.Errorf("%w: worker entry: %v", ErrCorrupt, err)
		}
		w.Dead = !p.Now.Before(w.DeadAt)
		out = append(out, w)
	}
	return out, s.wrap("workers", rows.Err())
}
