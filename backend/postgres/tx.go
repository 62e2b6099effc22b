package postgres

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/kyuhq/kyu/backend"
)

// The store enqueues in a caller's transaction.
var _ backend.TxEnqueuer = (*Store)(nil)

// EnqueueTx writes p.Jobs inside the caller's transaction tx, which must be
// on the database of this store: the jobs exist if and only if tx commits,
// and idle workers are notified only then (NOTIFY is delivered on commit).
// tx is a pgx.Tx, or a *sql.Tx whose *sql.DB uses the pgx driver
// (github.com/jackc/pgx/v5/stdlib, driver name "pgx"), which hands kyu's
// array arguments to PostgreSQL unchanged; any other type gives an error
// matching backend.ErrNotSupported. The result's ids are final, but a
// worker sees the jobs only after the commit. A failed call leaves tx
// aborted, as any failed statement does; roll it back.
func (s *store) EnqueueTx(ctx context.Context, tx any, p backend.EnqueueParams) (backend.EnqueueResult, error) {
	var r runner
	switch tx := tx.(type) {
	case *sql.Tx:
		if tx != nil {
			r = sqlRunner{tx}
		}
	case pgx.Tx:
		if tx != nil {
			r = pgxRunner{tx}
		}
	}
	if r == nil {
		return backend.EnqueueResult{}, fmt.Errorf("kyu postgres: EnqueueTx takes a pgx.Tx or a *sql.Tx (pgx driver), got %s: %w", txTypeName(tx), backend.ErrNotSupported)
	}
	return s.enqueueTx(ctx, r, p)
}

// txTypeName names tx's type for an error, saying when it is nil.
func txTypeName(tx any) string {
	switch tx := tx.(type) {
	case nil:
		return "nil"
	case *sql.Tx:
		if tx == nil {
			return "a nil *sql.Tx"
		}
	}
	return fmt.Sprintf("%T", tx)
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
