package kyu

import (
	"context"
	"fmt"

	"github.com/kyuhq/kyu/backend"
)

// EnqueueTx adds one job inside the caller's database transaction tx, as
// Enqueue does otherwise (same options, defaults, duplicates and errors):
// the job exists if and only if tx commits, so it can never run for a
// write the application rolled back. The returned id is final; workers
// see the job once tx commits.
//
// tx is the transaction of the store's own database: for the PostgreSQL
// store (backend/postgres) a pgx.Tx, or a *sql.Tx of the pgx
// database/sql driver; for the MySQL store (backend/mysql) a *sql.Tx of
// the go-sql-driver/mysql driver. A store that cannot enqueue in a transaction (see
// backend.TxEnqueuer), or a tx of a type it cannot use, gives an error
// matching ErrNotSupported that says what it expected; nothing is run in
// tx then. A store's failure otherwise leaves tx as a failed statement
// leaves it (in PostgreSQL, aborted: roll it back).
func (c *Client) EnqueueTx(ctx context.Context, tx any, jobType string, payload []byte, opts EnqueueOptions) (EnqueueResult, error) {
	res, err := c.EnqueueManyTx(ctx, tx, []JobSpec{{Type: jobType, Payload: payload, EnqueueOptions: opts}})
	if err != nil {
		return EnqueueResult{}, err
	}
	return res[0], nil
}

// EnqueueJSONTx adds one job whose payload is v encoded as JSON inside
// the caller's transaction tx, as EnqueueTx does.
func (c *Client) EnqueueJSONTx(ctx context.Context, tx any, jobType string, v any, opts EnqueueOptions) (EnqueueResult, error) {
	payload, err := marshalPayload(v)
	if err != nil {
		return EnqueueResult{}, err
	}
	return c.EnqueueTx(ctx, tx, jobType, payload, opts)
}

// EnqueueManyTx adds jobs inside the caller's transaction tx, as
// EnqueueMany does otherwise: all of them exist if and only if tx
// commits. tx and its errors are as for EnqueueTx.
func (c *Client) EnqueueManyTx(ctx context.Context, tx any, jobs []JobSpec) ([]EnqueueResult, error) {
	te, ok := c.b.(backend.TxEnqueuer)
	if !ok {
		return nil, fmt.Errorf("kyu: enqueue in a transaction: the store %T cannot: it needs a store that implements backend.TxEnqueuer (backend/postgres, with a pgx.Tx or a *sql.Tx; backend/mysql, with a *sql.Tx): %w", c.b, ErrNotSupported)
	}
	return c.enqueue(ctx, jobs, "enqueue in a transaction", func(ctx context.Context, p backend.EnqueueParams) (backend.EnqueueResult, error) {
		return te.EnqueueTx(ctx, tx, p)
	})
}
