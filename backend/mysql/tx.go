package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/kyuhq/kyu/backend"
)

// The store enqueues in a caller's transaction.
var _ backend.TxEnqueuer = (*Store)(nil)

// EnqueueTx writes p.Jobs inside the caller's transaction tx, a *sql.Tx
// on the store's database through github.com/go-sql-driver/mysql: the
// jobs exist if and only if tx commits, and workers (of any process) are
// woken at their next poll after the commit; a job whose
// tx is still open, or rolled back, is not claimable (claims skip rows
// other transactions hold, and a rolled-back row never was). Any other
// type of tx, or a nil one, gives an error matching
// backend.ErrNotSupported. A failed call leaves tx as any failed
// statement leaves it (a deadlock rolls it back whole): roll it back.
// The unique keys the jobs take are locked until tx ends. A JID that
// another transaction is writing at the same time makes the call wait
// for it, and fail with a duplicate key (1062) if it commits: roll back
// and run tx again, and the JID is then a duplicate of its holder.
func (s *store) EnqueueTx(ctx context.Context, tx any, p backend.EnqueueParams) (backend.EnqueueResult, error) {
	t, ok := tx.(*sql.Tx)
	if !ok || t == nil {
		return backend.EnqueueResult{}, fmt.Errorf("kyu/mysql: EnqueueTx takes a *sql.Tx of the go-sql-driver/mysql driver, got %s: %w", txTypeName(tx), backend.ErrNotSupported)
	}
	if err := p.Prepare(); err != nil {
		return backend.EnqueueResult{}, err
	}
	if err := s.begin(ctx); err != nil {
		return backend.EnqueueResult{}, err
	}
	defer s.end()
	pl, err := newEnqueuePlan(p)
	if err != nil {
		return backend.EnqueueResult{}, err
	}
	if err := s.enqueueIn(ctx, t, pl); err != nil {
		return backend.EnqueueResult{}, s.wrap("enqueue in transaction", err)
	}
	// The queues' versions are bumped in tx, so pollers see the bump
	// when tx commits (and never when it rolls back). The rows bumped are
	// shards of their own for each connection, so concurrent transactions
	// rarely wait for one another, and never for the store's own bumps.
	if queues := pl.pendingQueues(); len(queues) > 0 {
		slices.Sort(queues)
		vals := make([]string, len(queues))
		for i := range queues {
			vals[i] = "(?, 16 + CONNECTION_ID() % 64, 1)"
		}
		if _, err := t.ExecContext(ctx, fmt.Sprintf(s.sqls.bump, strings.Join(vals, ", ")), anyArgs(queues)...); err != nil {
			return backend.EnqueueResult{}, s.wrap("enqueue in transaction", err)
		}
	}
	return backend.EnqueueResult{Jobs: pl.res}, nil
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
