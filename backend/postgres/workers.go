package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kyuhq/kyu/backend"
)

// RegisterWorker records or replaces a worker's entry (its WorkerInfo as
// JSON, with the expiry in a column of its own for Workers and retention),
// keeping the command in the entry's JSON, and returns that command.
func (s *store) RegisterWorker(ctx context.Context, p backend.RegisterWorkerParams) (backend.RegisterWorkerResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.RegisterWorkerResult{}, err
	}
	defer s.end()
	w := p.Registered()
	raw, err := json.Marshal(w)
	if err != nil {
		return backend.RegisterWorkerResult{}, fmt.Errorf("kyu/postgres: register worker %s: %w", w.ID, err)
	}
	var cmd string
	if err := s.pool.QueryRow(ctx, s.sqls.registerWorker, w.ID, w.ExpiresAt, raw).Scan(&cmd); err != nil {
		return backend.RegisterWorkerResult{}, s.wrap("register worker "+w.ID, err)
	}
	return backend.RegisterWorkerResult{Command: backend.WorkerCommand(cmd)}, nil
}

// CommandWorker records a command in a worker's entry not expired at
// p.Now, keeping stop over quiet.
func (s *store) CommandWorker(ctx context.Context, p backend.CommandWorkerParams) (backend.WorkerInfo, error) {
	if err := s.begin(ctx); err != nil {
		return backend.WorkerInfo{}, err
	}
	defer s.end()
	var raw []byte
	err := s.pool.QueryRow(ctx, s.sqls.commandWorker, p.ID, string(p.Command), p.Now).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return backend.WorkerInfo{}, backend.ErrWorkerNotFound
	}
	if err != nil {
		return backend.WorkerInfo{}, s.wrap("command worker "+p.ID, err)
	}
	return decodeWorkerInfo(raw, p.Now)
}

// decodeWorkerInfo reads an entry's JSON as Workers shows it at now.
func decodeWorkerInfo(raw []byte, now time.Time) (backend.WorkerInfo, error) {
	var w backend.WorkerInfo
	if err := json.Unmarshal(raw, &w); err != nil {
		return w, fmt.Errorf("%w: worker entry: %v", ErrCorrupt, err)
	}
	w.LastSeen, w.DeadAt, w.ExpiresAt, w.StartedAt = w.LastSeen.UTC(), w.DeadAt.UTC(), w.ExpiresAt.UTC(), w.StartedAt.UTC()
	for i := range w.Periodic {
		w.Periodic[i].LastRun, w.Periodic[i].NextRun = w.Periodic[i].LastRun.UTC(), w.Periodic[i].NextRun.UTC()
	}
	w.Dead = !now.Before(w.DeadAt)
	return w, nil
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
		w, err := decodeWorkerInfo(raw, p.Now)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("workers", err)
	}
	return out, nil
}
