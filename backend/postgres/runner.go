package postgres

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"
)

// runner runs a statement for the enqueue path on a pool, on a pgx.Tx or
// on a database/sql transaction, calling each for every row it returns.
type runner interface {
	run(ctx context.Context, query string, args []any, each func(scan func(dest ...any) error) error) error
}

// pgxQuerier is what a pgxpool.Pool and a pgx.Tx have in common.
type pgxQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// pgxRunner runs statements through pgx.
type pgxRunner struct {
	q pgxQuerier
}

func (r pgxRunner) run(ctx context.Context, query string, args []any, each func(scan func(dest ...any) error) error) error {
	rows, err := r.q.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// sqlRunner runs statements on a database/sql transaction of the pgx
// driver, which passes the arguments through to pgx unchanged.
type sqlRunner struct {
	tx *sql.Tx
}

func (r sqlRunner) run(ctx context.Context, query string, args []any, each func(scan func(dest ...any) error) error) error {
	rows, err := r.tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}
