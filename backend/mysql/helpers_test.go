package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/kyuhq/kyu/backend/backendtest"
)

// Where the tests find MySQL or MariaDB.
const (
	testURLEnv     = "KYU_TEST_MYSQL_URL"
	testDefaultURL = "mysql://root@127.0.0.1:3306/test"
)

// testURL returns the test server's URL, ending the test (skip, or failure
// when required) when the server cannot be reached.
func testURL(t testing.TB) string {
	t.Helper()
	url := backendtest.ServiceURL(testURLEnv, testDefaultURL)
	db, err := openRaw(url)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = db.PingContext(ctx)
		cancel()
		db.Close()
	}
	if err != nil {
		backendtest.Unreachable(t, "mysql", testURLEnv, url, err)
	}
	return url
}

// openRaw opens a plain database/sql pool on the database of a mysql://
// URL, for what the tests do beside the store.
func openRaw(url string) (*sql.DB, error) {
	cfg, _, err := parseURL(url, Options{})
	if err != nil {
		return nil, err
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

// testPrefix returns a fresh table prefix for one test.
func testPrefix(t testing.TB) string {
	t.Helper()
	b := make([]byte, 5)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "kt" + hex.EncodeToString(b) + "_"
}

// dropTables removes the tables of a test's prefix.
func dropTables(t testing.TB, url, prefix string) {
	t.Helper()
	db, err := openRaw(url)
	if err != nil {
		t.Errorf("drop tables %s*: %v", prefix, err)
		return
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := make([]string, 0, len(tables)+1)
	for _, tb := range append([]string{"schema_versions"}, tables...) {
		names = append(names, "`"+prefix+tb+"`")
	}
	if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+strings.Join(names, ", ")); err != nil {
		t.Errorf("drop tables %s*: %v", prefix, err)
	}
}

// openTestStore opens a store with a fresh prefix, migrated, with a small
// pool; cleanup closes it and drops its tables.
func openTestStore(t testing.TB, opts Options) *Store {
	t.Helper()
	url := testURL(t)
	if opts.Prefix == "" {
		opts.Prefix = testPrefix(t)
	}
	opts.AutoMigrate = true
	if opts.MaxConns == 0 {
		opts.MaxConns = 4
	}
	s, err := Open(context.Background(), url, opts)
	if err != nil {
		dropTables(t, url, opts.Prefix)
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		s.Close()
		dropTables(t, url, opts.Prefix)
	})
	return s
}
