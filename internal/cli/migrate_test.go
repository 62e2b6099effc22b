package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kyuhq/kyu/backend/backendtest"
	kyumysql "github.com/kyuhq/kyu/backend/mysql"
)

func TestMigrateUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"migrate"}, {"migrate", "--backend", "pebble:///tmp/x"}} {
		_, _, err := run(t, args...)
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("kyu %v = %v; want a usage error", args, err)
		}
	}
}

func TestMigratePostgres(t *testing.T) {
	t.Parallel()
	url := backendtest.ServiceURL("KYU_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		backendtest.Unreachable(t, "postgres", "KYU_TEST_POSTGRES_URL", url, err)
	}
	defer conn.Close(context.Background())
	schema := fmt.Sprintf("kyu_test_cli_%d", time.Now().UnixNano())
	defer conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	target := url + sep + "schema=" + schema
	for _, want := range []string{"schema migrated from version 0 to", "nothing to do"} {
		out, _, err := run(t, "migrate", "--backend", target)
		if err != nil {
			t.Fatalf("kyu migrate: %v", err)
		}
		if !strings.Contains(out, want) {
			t.Fatalf("kyu migrate printed %q; want it to say %q", out, want)
		}
	}
}

func TestMigrateMySQL(t *testing.T) {
	t.Parallel()
	url := backendtest.ServiceURL("KYU_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")
	prefix := fmt.Sprintf("kyu_cli_%d_", time.Now().UnixNano()%1e9)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	target := url + sep + "prefix=" + prefix
	for i, want := range []string{"schema migrated from version 0 to", "nothing to do"} {
		out, _, err := run(t, "migrate", "--backend", target)
		if err != nil {
			if i == 0 && strings.Contains(err.Error(), "connect") {
				backendtest.Unreachable(t, "mysql", "KYU_TEST_MYSQL_URL", url, err)
			}
			t.Fatalf("kyu migrate: %v", err)
		}
		if !strings.Contains(out, want) {
			t.Fatalf("kyu migrate printed %q; want it to say %q", out, want)
		}
	}
	s, err := kyumysql.Open(t.Context(), target, kyumysql.Options{})
	if err != nil {
		t.Fatalf("open the migrated store without automigrate: %v", err)
	}
	defer s.Close()
	// Every table of the prefix, whatever the migrations made.
	rows, err := s.DB().QueryContext(context.Background(),
		"SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ?", prefix+"%")
	if err != nil {
		t.Fatalf("list the tables: %v", err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatalf("list the tables: %v", err)
		}
		names = append(names, "`"+name+"`")
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("list the tables: %v", err)
	}
	if len(names) == 0 {
		t.Fatalf("no table has the prefix %s", prefix)
	}
	if _, err := s.DB().ExecContext(context.Background(), "DROP TABLE IF EXISTS "+strings.Join(names, ", ")); err != nil {
		t.Errorf("drop tables: %v", err)
	}
}
