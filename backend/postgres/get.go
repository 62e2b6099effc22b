package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kyuhq/kyu/backend"
)

// Get returns the job with the given id, or with the given JID, or
// ErrNotFound.
func (s *store) Get(ctx context.Context, p backend.GetParams) (*backend.Job, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	if p.JID != "" {
		if !backend.ValidText(p.JID) {
			return nil, backend.ErrNotFound // no job has it: Enqueue refuses it
		}
		j, err := scanJobLogs(s.pool.QueryRow(ctx, s.sqls.getJID, p.JID), true)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, backend.ErrNotFound
		}
		if err != nil {
			return nil, s.wrap(fmt.Sprintf("get jid %q", p.JID), err)
		}
		return j, nil
	}
	id, err := uuid.Parse(p.ID)
	if err != nil {
		return nil, backend.ErrNotFound
	}
	j, err := scanJobLogs(s.pool.QueryRow(ctx, s.sqls.get, id.String()), true)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, backend.ErrNotFound
	}
	if err != nil {
		return nil, s.wrap("get "+p.ID, err)
	}
	return j, nil
}

// Delete removes a job that is not active. A unique key the job held for a
// UniqueFor period keeps holding, remembering the job's last state.
func (s *store) Delete(ctx context.Context, p backend.DeleteParams) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	id, err := uuid.Parse(p.ID)
	if err != nil {
		return backend.ErrNotFound
	}
	var n int64
	if err := s.pool.QueryRow(ctx, s.sqls.delete, id.String()).Scan(&n); err != nil {
		return s.wrap("delete "+p.ID, err)
	}
	if n > 0 {
		return nil
	}
	var state string
	err = s.pool.QueryRow(ctx, s.sqls.deleteState, id.String()).Scan(&state)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return backend.ErrNotFound
	case err != nil:
		return s.wrap("delete "+p.ID, err)
	case state == string(backend.StateActive):
		return backend.ErrJobActive
	}
	// It changed between the two statements: it is not active now, so try
	// again.
	return s.deleteAgain(ctx, id.String(), p.ID)
}

// deleteAgain is Delete's second try after a job left the active state
// between its statements.
func (s *store) deleteAgain(ctx context.Context, id, name string) error {
	var n int64
	if err := s.pool.QueryRow(ctx, s.sqls.delete, id).Scan(&n); err != nil {
		return s.wrap("delete "+name, err)
	}
	if n == 0 {
		return backend.ErrJobActive
	}
	return nil
}
