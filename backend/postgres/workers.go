package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kyuhq/kyu/backend"
)

// RegisterWorker records or replaces a worker's entry (its WorkerInfo as
// JSON, with the expiry in a column of its own for Workers and retention).
func (s *store) RegisterWorker(ctx context.Context, p backend.RegisterWorkerParams) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	w := p.Registered()
	raw, err := json.Marshal(w)
	if err != nil {
		return fmt.Errorf("kyu/postgres: register worker %s: %w", w.ID, err)
	}
	if _, err := s.pool.Exec(ctx, s.sqls.registerWorker, w.ID, w.ExpiresAt, raw); err != nil {
		return s.wrap("register worker "+w.ID, err)
	}
	return nil
}

// DeregisterWorker removes a worker's entry; an unknown id is no error.
func (s *store) DeregisterWorker(ctx context.Context, p backend.DeregisterWorkerParams) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	if _, err := s.pool.Exec(ctx, s.sqls.deregisterWorker, p.ID); err != nil {
		return s.wrap("deregister worker "+p.ID, err)
	}
	return nil
}

// Workers lists the entries that have not expired at p.Now, by id, marking
// the dead ones.
func (s *store) Workers(ctx context.Context, p backend.WorkersParams) ([]backend.WorkerInfo, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	rows, err := s.pool.Query(ctx, s.sqls.workers, p.Now)
	if err != nil {
		return nil, s.wrap("workers", err)
	}
	defer rows.Close()
	var out []backend.WorkerInfo
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, s.wrap("workers", err)
		}
		var w backend.WorkerInfo
		if err := json.Unmarshal(raw, &w); err != nil {
			return nil, fmt.Errorf("%w: worker entry: %v", ErrCorrupt, err)
		}
		w.LastSeen, w.DeadAt, w.ExpiresAt, w.StartedAt = w.LastSeen.UTC(), w.DeadAt.UTC(), w.ExpiresAt.UTC(), w.StartedAt.UTC()
		w.Dead = !p.Now.Before(w.DeadAt)
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("workers", err)
	}
	return out, nil
}
