package postgres

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"

	"github.com/kyuhq/kyu/backend"
)

// EnqueueTx writes p.Jobs inside the caller's transaction tx, which must be
// on the database of this store: the jobs exist if and only if tx commits,
// and idle workers are notified only then (NOTIFY is delivered on commit).
// The result's ids are final, but a worker sees the jobs only after the
// commit. A failed call leaves tx aborted, as any failed statement does;
// roll it back.
func (s *store) EnqueueTx(ctx context.Context, tx pgx.Tx, p backend.EnqueueParams) (backend.EnqueueResult, error) {
	return s.enqueueTx(ctx, pgxRunner{tx}, p)
}

// EnqueueSQLTx is EnqueueTx for a database/sql transaction. The *sql.DB
// must use the pgx driver (github.com/jackc/pgx/v5/stdlib, driver name
// "pgx"), which hands kyu's array arguments to PostgreSQL unchanged.
func (s *store) EnqueueSQLTx(ctx context.Context, tx *sql.Tx, p backend.EnqueueParams) (backend.EnqueueResult, error) {
	return s.enqueueTx(ctx, sqlRunner{tx}, p)
}

func (s *store) enqueueTx(ctx context.Context, r runner, p backend.EnqueueParams) (backend.EnqueueResult, error) {
	if err := p.Prepare(); err != nil {
		return backend.EnqueueResult{}, err
	}
	if err := s.begin(ctx); err != nil {
		return backend.EnqueueResult{}, err
	}
	defer s.end()
	plan, err := newEnqueuePlan(p)
	if err != nil {
		return backend.EnqueueResult{}, err
	}
	if err := s.enqueueIn(ctx, r, plan, true); err != nil {
		return backend.EnqueueResult{}, s.wrap("enqueue in transaction", err)
	}
	return plan.result(), nil
}
