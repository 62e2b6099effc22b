package backend

import "context"

// TxEnqueuer is the optional ability of a store to enqueue inside the
// caller's own database transaction: the jobs exist if and only if that
// transaction commits, so a job can never run for a write the
// application rolled back, nor be missing for one it committed. A store
// implements it for the transaction types of the drivers it is built on
// (PostgreSQL: pgx.Tx, and *sql.Tx over the pgx database/sql driver;
// MySQL: *sql.Tx over go-sql-driver/mysql);
// callers find it by type assertion, so the root package imports no
// database driver.
type TxEnqueuer interface {
	// EnqueueTx writes p.Jobs as Enqueue does (checks, defaults,
	// duplicates), inside tx, which must belong to the store's own
	// database. A tx of a type the store cannot use, or a nil one, gives
	// an error matching ErrNotSupported that names the types it takes, and
	// runs nothing in tx. Other failures leave tx as any failed statement
	// leaves it (in PostgreSQL, aborted: roll it back).
	EnqueueTx(ctx context.Context, tx any, p EnqueueParams) (EnqueueResult, error)
}
