package mysql

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

func TestParseURLRefusesBadURLs(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"mysql://u:hunter2@[::1",
		"mysql://u:hunter2@host:3306/",
		"mysql://u:hunter2@host:3306",
		"mysql://u:hunter2@host:3306/a/b",
		"mysql://u:hunter2@host:port/db",
		"mysql://u:hunter2@host/db?automigrate=maybe",
		"mysql://u:hunter2@host/db?socket=/tmp/s",
		"mysql://u:hunter2@host/db?tls=nonsense",
		"postgres://u:hunter2@host/db",
	} {
		_, _, err := parseURL(raw, Options{})
		if !errors.Is(err, ErrBadURL) {
			t.Errorf("parseURL(%q) = %v; want ErrBadURL", raw, err)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("parseURL(%q) repeats the password: %v", raw, err)
		}
	}
	_, err := Open(t.Context(), "mysql://root@127.0.0.1:3306/test?prefix=1bad", Options{})
	if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), "1bad") {
		t.Errorf("Open with a bad prefix = %v; want ErrBadURL naming it", err)
	}
}

func TestParseURLReadsOptions(t *testing.T) {
	t.Parallel()
	cfg, opts, err := parseURL("mysql://u:p%40ss@db.example:3307/app?prefix=jobs_&automigrate=false&tls=skip-verify&timeout=3s", Options{AutoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "u" || cfg.Passwd != "p@ss" || cfg.Addr != "db.example:3307" || cfg.Net != "tcp" || cfg.DBName != "app" ||
		cfg.TLSConfig != "skip-verify" || cfg.Timeout != 3*time.Second || opts.Prefix != "jobs_" || opts.AutoMigrate {
		t.Fatalf("parseURL = %+v, %+v", cfg, opts)
	}
	cfg, _, err = parseURL("mysql://root@/app?socket=/run/mysqld/mysqld.sock", Options{})
	if err != nil || cfg.Net != "unix" || cfg.Addr != "/run/mysqld/mysqld.sock" {
		t.Fatalf("socket URL = %+v, %v", cfg, err)
	}
}

func TestParseServerRefusesOldOrOthers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		version, comment, want string
	}{
		{"5.7.44", "MySQL Community Server (GPL)", "MySQL 5.7"},
		{"10.5.22-MariaDB", "MariaDB Server", "MariaDB 10.5"},
		{"5.5.5-10.3.39-MariaDB", "mariadb.org binary distribution", "MariaDB 10.3"},
		{"8.0.11-TiDB-v7.5.0", "TiDB Server", "not MySQL or MariaDB"},
		{"banana", "", "cannot read"},
	} {
		_, err := parseServer(c.version, c.comment)
		if !errors.Is(err, ErrUnsupportedServer) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseServer(%q) = %v; want ErrUnsupportedServer saying %q", c.version, err, c.want)
		}
	}
	for _, c := range []struct {
		version string
		mariadb bool
	}{{"8.0.36", false}, {"8.4.0", false}, {"10.6.16-MariaDB", true}, {"10.11.19-MariaDB-0+deb12u1", true}, {"11.4.2-MariaDB", true}} {
		sv, err := parseServer(c.version, "")
		if err != nil || sv.mariadb != c.mariadb {
			t.Errorf("parseServer(%q) = %+v, %v; want accepted, mariadb %v", c.version, sv, err, c.mariadb)
		}
	}
}

// TestOpenNotMySQL: a server that does not speak MySQL's protocol (the
// test's PostgreSQL or Redis, when they run) is refused with
// ErrUnsupportedServer or a connect error, quickly, never a hang.
func TestOpenNotMySQL(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"127.0.0.1:5432", "127.0.0.1:6379"} {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		_, err := Open(ctx, "mysql://root@"+addr+"/test?timeout=3s&readTimeout=3s", Options{})
		cancel()
		if err == nil {
			t.Fatalf("Open on %s succeeded", addr)
		}
		if !strings.Contains(err.Error(), "kyu/mysql") {
			t.Errorf("Open on %s = %v; want an error of this package", addr, err)
		}
	}
}

func TestOpenMissingDatabase(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	cfg, _, err := parseURL(url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	missing := strings.Replace(url, "/"+cfg.DBName, "/kyu_no_such_db", 1)
	_, err = Open(t.Context(), missing, Options{AutoMigrate: true})
	if err == nil || !strings.Contains(err.Error(), `database "kyu_no_such_db" does not exist`) {
		t.Fatalf("Open on a missing database = %v; want it to say the database does not exist", err)
	}
}

// TestOpenHalfMigrated: tables missing one of their version's tables (a
// migration cut short, a table dropped by hand) are refused naming the
// table, and Migrate completes them without losing the jobs.
func TestOpenHalfMigrated(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	url := testURL(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	res, err := s.Enqueue(t.Context(), backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "t"}}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(t.Context(), "DROP TABLE `"+s.Prefix()+"job_logs`"); err != nil {
		t.Fatal(err)
	}
	_, err = Open(t.Context(), url, Options{Prefix: s.Prefix()})
	if !errors.Is(err, ErrNotMigrated) || !strings.Contains(err.Error(), s.Prefix()+"job_logs") {
		t.Fatalf("Open on half-migrated tables = %v; want ErrNotMigrated naming the table", err)
	}
	if from, to, err := Migrate(t.Context(), url, Options{Prefix: s.Prefix()}); err != nil || from != to {
		t.Fatalf("Migrate of the recorded version = %d, %d, %v", from, to, err)
	}
	repaired, err := Open(t.Context(), url, Options{Prefix: s.Prefix()})
	if err != nil {
		t.Fatalf("Open after Migrate made the missing table again: %v", err)
	}
	repaired.Close()
	// And a version never recorded: the migration's statements ran, its
	// record did not.
	if _, err := s.DB().ExecContext(t.Context(), "DELETE FROM `"+s.Prefix()+"schema_versions`"); err != nil {
		t.Fatal(err)
	}
	_, err = Open(t.Context(), url, Options{Prefix: s.Prefix()})
	if !errors.Is(err, ErrNotMigrated) || !strings.Contains(err.Error(), "version 0") {
		t.Fatalf("Open on unrecorded tables = %v; want ErrNotMigrated at version 0", err)
	}
	from, to, err := Migrate(t.Context(), url, Options{Prefix: s.Prefix()})
	if err != nil || from != 0 || to != SchemaVersion() {
		t.Fatalf("Migrate = %d, %d, %v", from, to, err)
	}
	again, err := Open(t.Context(), url, Options{Prefix: s.Prefix()})
	if err != nil {
		t.Fatalf("Open after Migrate: %v", err)
	}
	defer again.Close()
	if j, err := again.Get(t.Context(), backend.GetParams{ID: res.Jobs[0].ID}); err != nil || j.State != backend.StatePending {
		t.Fatalf("the job after the repair = %+v, %v; want it pending", j, err)
	}
	if _, err := s.DB().ExecContext(t.Context(), "INSERT INTO `"+s.Prefix()+"schema_versions` (version, name, applied_at) VALUES (99, '0099_future.sql', 0)"); err != nil {
		t.Fatal(err)
	}
	_, err = Open(t.Context(), url, Options{Prefix: s.Prefix(), AutoMigrate: true})
	if !errors.Is(err, ErrSchemaNewer) {
		t.Fatalf("Open on newer tables = %v; want ErrSchemaNewer", err)
	}
}

// TestCorruptRow: a row edited into values kyu never writes gives an
// error naming the job and the field; the other jobs are unharmed, and
// the row itself is left for a person to mend.
func TestCorruptRow(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Millisecond)
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "a", Queue: "bad"}, {Type: "b", Queue: "good"}}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	bad, good := res.Jobs[0].ID, res.Jobs[1].ID
	for _, edit := range []struct{ set, field string }{
		{"state = 'bogus'", "state"},
		{"errors = '{not json'", "errors"},
		{"priority = 5000", "priority"},
	} {
		if _, err := s.DB().ExecContext(ctx, "UPDATE `"+s.Prefix()+"jobs` SET "+edit.set+" WHERE id = ?", bad); err != nil {
			t.Fatal(err)
		}
		_, err := s.Get(ctx, backend.GetParams{ID: bad})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), edit.field) {
			t.Fatalf("Get of a row with %s = %v; want ErrCorrupt naming the job and %s", edit.set, err, edit.field)
		}
		if _, err := s.DB().ExecContext(ctx, "UPDATE `"+s.Prefix()+"jobs` SET state = 'pending', errors = NULL, priority = 0 WHERE id = ?", bad); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DB().ExecContext(ctx, "UPDATE `"+s.Prefix()+"jobs` SET errors = '{not json' WHERE id = ?", bad); err != nil {
		t.Fatal(err)
	}
	_, err = s.Claim(ctx, backend.ClaimParams{Queues: []string{"bad"}, Max: 1, Lease: time.Minute, Now: now})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Claim over the corrupt row = %v; want ErrCorrupt", err)
	}
	c, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"good"}, Max: 1, Lease: time.Minute, Now: now})
	if err != nil || len(c.Jobs) != 1 || c.Jobs[0].ID != good {
		t.Fatalf("Claim of the other queue = %v, %v; want the good job", c.Jobs, err)
	}
	var state string
	if err := s.DB().QueryRowContext(ctx, "SELECT state FROM `"+s.Prefix()+"jobs` WHERE id = ?", bad).Scan(&state); err != nil || state != "pending" {
		t.Fatalf("the corrupt job's row = %q, %v; want it left pending, unclaimed", state, err)
	}
}
