package postgres

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kyuhq/kyu/backend/backendtest"
)

// TestMain runs the package's tests and then, on a server whose autovacuum
// is off, vacuums the system catalogs of the test database. Every test
// makes and drops a schema of its own; with autovacuum off the dead catalog
// rows that leaves would stay (234,071 in pg_attribute after a day of
// runs on the machine these tests were written on) and slow every later
// connection and statement on the shared server.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := vacuumCatalogs(); err != nil {
		fmt.Fprintln(os.Stderr, "kyu/postgres tests: vacuum the catalogs:", err)
	}
	os.Exit(code)
}

// catalogs are the system catalogs that making and dropping a schema of
// tables, indexes and a function writes rows into.
const catalogs = "pg_catalog.pg_attribute, pg_catalog.pg_class, pg_catalog.pg_depend, pg_catalog.pg_type, " +
	"pg_catalog.pg_index, pg_catalog.pg_attrdef, pg_catalog.pg_constraint, pg_catalog.pg_proc, pg_catalog.pg_namespace, " +
	"pg_catalog.pg_statistic"

// vacuumCatalogs vacuums the catalogs of the test database when the server
// is reachable and its autovacuum is off; otherwise it does nothing.
func vacuumCatalogs() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, backendtest.ServiceURL(testURLEnv, testDefaultURL))
	if err != nil {
		return nil // no server: the tests said so already
	}
	defer conn.Close(ctx)
	var autovacuum string
	if err := conn.QueryRow(ctx, "SHOW autovacuum").Scan(&autovacuum); err != nil {
		return err
	}
	if autovacuum == "on" {
		return nil
	}
	_, err = conn.Exec(ctx, "VACUUM "+catalogs)
	return err
}
