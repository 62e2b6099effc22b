package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MinServerVersion is the oldest PostgreSQL this package runs on, as
// server_version_num: 14.0. (It is tested on 15.)
const MinServerVersion = 140000

// checkServer refuses a server that is not PostgreSQL or is too old, and
// reports whether its autovacuum is on.
func checkServer(ctx context.Context, pool *pgxpool.Pool) (autovacuum bool, err error) {
	var num int
	var version, av string
	err = pool.QueryRow(ctx, `SELECT current_setting('server_version_num')::int, version(), current_setting('autovacuum')`).Scan(&num, &version, &av)
	if err != nil {
		return false, fmt.Errorf("kyu/postgres: ask the server's version: %w", err)
	}
	if !strings.HasPrefix(version, "PostgreSQL ") {
		return false, fmt.Errorf("%w: the server says it is %q, not PostgreSQL", ErrUnsupportedServer, version)
	}
	if num < MinServerVersion {
		return false, fmt.Errorf("%w: PostgreSQL %d.%d is older than the minimum, %d", ErrUnsupportedServer, num/10000, num%10000, MinServerVersion/10000)
	}
	return av == "on", nil
}

// isUndefinedTable reports a missing table (SQLSTATE 42P01) or schema (3F000).
func isUndefinedTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000")
}
