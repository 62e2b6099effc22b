package move_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/rueidis"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/backendtest"
	"github.com/kyuhq/kyu/backend/memory"
	"github.com/kyuhq/kyu/backend/mysql"
	"github.com/kyuhq/kyu/backend/pebble"
	"github.com/kyuhq/kyu/backend/postgres"
	"github.com/kyuhq/kyu/backend/redis"
	"github.com/kyuhq/kyu/backend/remote"
	"github.com/kyuhq/kyu/server"
)

// t0 is the clock of every call the tests make.
var t0 = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

// openStore opens a fresh store of the kind named, closed (and for
// PostgreSQL dropped) with the test.
func openStore(t *testing.T, kind string) backend.Backend {
	t.Helper()
	switch kind {
	case "memory":
		return memory.New()
	case "pebble":
		return openPebble(t, t.TempDir())
	case "postgres":
		url := backendtest.ServiceURL("KYU_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
		b := make([]byte, 6)
		rand.Read(b)
		schema := "kyu_move_" + hex.EncodeToString(b)
		s, err := postgres.Open(context.Background(), url, postgres.Options{Schema: schema, AutoMigrate: true, MaxConns: 8})
		if err != nil {
			backendtest.Unreachable(t, "postgres", "KYU_TEST_POSTGRES_URL", url, err)
		}
		t.Cleanup(func() {
			s.Close()
			ctx := context.Background()
			if conn, err := pgx.Connect(ctx, url); err == nil {
				conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
				conn.Close(ctx)
			}
		})
		return s
	case "mysql":
		return openMySQL(t)
	case "redis":
		url := backendtest.ServiceURL("KYU_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
		o, err := redis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 6)
		rand.Read(b)
		o.Prefix = "kyu-move-" + hex.EncodeToString(b)
		s, err := redis.Open(context.Background(), o)
		if err != nil {
			backendtest.Unreachable(t, "redis", "KYU_TEST_REDIS_URL", url, err)
		}
		t.Cleanup(func() {
			s.Close()
			c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: o.Addrs, SelectDB: o.DB, Username: o.Username, Password: o.Password, DisableCache: true, ForceSingleClient: true})
			if err != nil {
				return
			}
			defer c.Close()
			ctx := context.Background()
			var cursor uint64
			for {
				e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match("{"+o.Prefix+"*").Count(1000).Build()).AsScanEntry()
				if err != nil {
					return
				}
				for _, k := range e.Elements {
					c.Do(ctx, c.B().Unlink().Key(k).Build())
				}
				if cursor = e.Cursor; cursor == 0 {
					return
				}
			}
		})
		return s
	case "remote":
		return openRemote(t, memory.New())
	}
	t.Fatalf("no store %q", kind)
	return nil
}

// openMySQL opens a MySQL store with a fresh table prefix, whose tables
// are dropped with the test.
func openMySQL(t *testing.T) backend.Backend {
	t.Helper()
	url := backendtest.ServiceURL("KYU_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")
	b := make([]byte, 5)
	rand.Read(b)
	prefix := "kymove" + hex.EncodeToString(b) + "_"
	s, err := mysql.Open(context.Background(), url, mysql.Options{Prefix: prefix, AutoMigrate: true, MaxConns: 8})
	if err != nil {
		backendtest.Unreachable(t, "mysql", "KYU_TEST_MYSQL_URL", url, err)
	}
	t.Cleanup(func() {
		// The tables go before the pool closes, as the pool is the way to them.
		ctx := context.Background()
		db := s.DB()
		rows, err := db.QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ?", prefix+"%")
		if err == nil {
			var names []string
			for rows.Next() {
				var n string
				if rows.Scan(&n) == nil {
					names = append(names, "`"+n+"`")
				}
			}
			rows.Close()
			if len(names) > 0 {
				db.ExecContext(ctx, "DROP TABLE IF EXISTS "+strings.Join(names, ", "))
			}
		}
		s.Close()
	})
	return s
}

func openPebble(t *testing.T, dir string) backend.Backend {
	t.Helper()
	s, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openRemote serves store over HTTP and returns a remote backend for it.
func openRemote(t *testing.T, store backend.Backend) backend.Backend {
	t.Helper()
	srv, err := server.New(server.Config{Backend: store, Addr: "127.0.0.1:0", Token: "move-test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	b, err := remote.Open("http://"+srv.Addr().String(), remote.Options{Token: "move-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// fill writes n jobs with a history into b, in two queues, across every
// state: scheduled, pending (with unique keys), active, retry, completed
// (with logs, progress and results), failed (with errors) and cancelled.
// It returns the ids.
func fill(t *testing.T, b backend.Backend, n int) []string {
	t.Helper()
	ctx := t.Context()
	var ids []string
	pay := []byte(`{"to":"someone@example.com","body":"` + strings.Repeat("x", 60) + `"}`)
	for start := 0; start < n; start += 100 {
		p := backend.EnqueueParams{Now: t0}
		for i := start; i < min(n, start+100); i++ {
			nj := backend.NewJob{Type: "email.send", Queue: []string{"emails", "reports"}[i%2], Payload: pay,
				Title: fmt.Sprintf("job %d", i), Priority: i % 5, Tags: []string{"t" + fmt.Sprint(i%3)},
				Metadata: map[string]string{"i": fmt.Sprint(i)}, Retention: backend.RetainForever}
			switch i % 7 {
			case 0:
				nj.RunAt, nj.Deadline = t0.Add(time.Hour), t0.Add(2*time.Hour)
			case 1:
				nj.UniqueKey = fmt.Sprintf("key-%d", i)
			case 2:
				nj.UniqueKey, nj.UniqueFor = fmt.Sprintf("for-%d", i), 48*time.Hour
			}
			p.Jobs = append(p.Jobs, nj)
		}
		res, err := b.Enqueue(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Jobs {
			ids = append(ids, r.ID)
		}
	}
	index := map[string]int{}
	for i, id := range ids {
		index[id] = i
	}
	now := t0.Add(time.Minute)
	var releases []backend.Lease
	for _, q := range []string{"emails", "reports"} {
		for {
			res, err := b.Claim(ctx, backend.ClaimParams{Queues: []string{q}, Max: 200, Lease: 24 * time.Hour, WorkerID: "w-1", Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Jobs) == 0 {
				break
			}
			var reports []backend.ReportItem
			var completes []backend.CompleteItem
			var fails []backend.FailItem
			for _, j := range res.Jobs {
				l := backend.Lease{JobID: j.ID, Token: j.LeaseToken}
				reports = append(reports, backend.ReportItem{Lease: l, Progress: &backend.Progress{Percent: 50, Message: "half"}, Logs: []string{"started", "working"}})
				switch index[j.ID] % 7 {
				case 1: // pending again, with an interrupted attempt
					releases = append(releases, l)
				case 3:
					completes = append(completes, backend.CompleteItem{Lease: l, Result: []byte(`{"sent":true}`)})
				case 4:
					fails = append(fails, backend.FailItem{Lease: l, Message: "smtp: 550", Stack: "main.go:1", Final: true})
				case 5:
					fails = append(fails, backend.FailItem{Lease: l, Message: "timeout", RetryAt: now.Add(time.Hour)})
				}
			}
			if _, err := b.Report(ctx, backend.ReportParams{Items: reports, Now: now}); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Complete(ctx, backend.CompleteParams{Items: completes, Now: now}); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Fail(ctx, backend.FailParams{Items: fails, Now: now}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := b.Release(ctx, backend.ReleaseParams{Leases: releases, Now: now}); err != nil {
		t.Fatal(err)
	}
	// Cancel the scheduled jobs of one queue; the active ones (i%7 == 2
	// and 6) stay active.
	for i, id := range ids {
		if i%7 == 0 && i%2 == 1 {
			if _, err := b.Cancel(ctx, backend.CancelParams{ID: id, Now: now}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ids
}

// counts returns the jobs of b per state.
func counts(t *testing.T, b backend.Backend) map[backend.State]int64 {
	t.Helper()
	st, err := b.Stats(t.Context(), backend.StatsParams{Now: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[backend.State]int64{}
	for _, q := range st.Queues {
		for s, n := range q.Counts {
			out[s] += n
		}
	}
	return out
}
