package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kyuhq/kyu/backend/backendtest"
)

// Where the tests find PostgreSQL.
const (
	testURLEnv     = "KYU_TEST_POSTGRES_URL"
	testDefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

// testURL returns the test server's URL, ending the test (skip, or failure
// when required) when the server cannot be reached.
func testURL(t testing.TB) string {
	t.Helper()
	url := backendtest.ServiceURL(testURLEnv, testDefaultURL)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err == nil {
		err = conn.Ping(ctx)
		conn.Close(ctx)
	}
	if err != nil {
		backendtest.Unreachable(t, "postgres", testURLEnv, url, err)
	}
	return url
}

// testSchemaName returns a fresh schema name for one test.
func testSchemaName(t testing.TB) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "kyu_test_" + hex.EncodeToString(b)
}

// dropSchema removes a test's schema with everything in it.
func dropSchema(t testing.TB, url, schema string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
	}
}

// openTestStore opens a store in a fresh schema, migrated, with a small
// pool; cleanup closes it and drops the schema.
func openTestStore(t testing.TB, opts Options) *Store {
	t.Helper()
	url := testURL(t)
	if opts.Schema == "" {
		opts.Schema = testSchemaName(t)
	}
	opts.AutoMigrate = true
	if opts.MaxConns == 0 {
		opts.MaxConns = 4
	}
	s, err := Open(context.Background(), url, opts)
	if err != nil {
		dropSchema(t, url, opts.Schema)
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		s.Close()
		dropSchema(t, url, opts.Schema)
	})
	return s
}
