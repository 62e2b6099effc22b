package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kyuhq/kyu/backend"
)

// TestCoalescedEnqueueJID: in a coalesced group, a JID asked for by two
// callers goes to the first (the second seeing a duplicate of the first's
// job, whatever queue it asked for), a JID held before the group is
// reported as such, and a JID checked first keeps its item from taking
// its unique key.
func TestCoalescedEnqueueJID(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	one := func(queue, jid, key string) backend.EnqueueParams {
		return backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "t", Queue: queue, Payload: []byte(`{}`), JID: jid, UniqueKey: key}}}
	}
	held, err := s.Enqueue(ctx, one("q", "held", ""))
	if err != nil {
		t.Fatal(err)
	}

	holdLine(t, s)
	calls := []*lineCall{
		joinLine(t, s, ctx, one("q", "a", "")),
		joinLine(t, s, ctx, one("other", "a", "")),   // 1: a duplicate of 0
		joinLine(t, s, ctx, one("q", "held", "key")), // 2: a duplicate of held; takes no key
		joinLine(t, s, ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{ // 3: its second job a duplicate of its first
			{Type: "t", Queue: "q", Payload: []byte(`{}`), JID: "b"},
			{Type: "t", Queue: "q", Payload: []byte(`{}`), JID: "b"},
			{Type: "t", Queue: "q", Payload: []byte(`{}`), JID: "c", UniqueKey: "key"},
		}}),
		joinLine(t, s, ctx, one("q", "c", "")), // 4: a duplicate of 3's third
	}
	releaseLine(s)
	res := make([][]backend.EnqueuedJob, len(calls))
	for i, c := range calls {
		r, err := c.wait(t)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		res[i] = r.Jobs
	}
	dupOf := func(i, j int, want backend.EnqueuedJob) {
		t.Helper()
		if got := res[i][j]; !got.Duplicate || got.ID != want.ID {
			t.Errorf("call %d job %d: %+v, want a duplicate of %s", i, j, got, want.ID)
		}
	}
	fresh := func(i, j int) {
		t.Helper()
		if got := res[i][j]; got.Duplicate {
			t.Errorf("call %d job %d: %+v, want a new job", i, j, got)
		}
	}
	fresh(0, 0)
	dupOf(1, 0, res[0][0])
	dupOf(2, 0, held.Jobs[0])
	fresh(3, 0)
	dupOf(3, 1, res[3][0])
	fresh(3, 2) // the key was not taken by call 2
	dupOf(4, 0, res[3][2])
	for jid, want := range map[string]string{"a": res[0][0].ID, "held": held.Jobs[0].ID, "b": res[3][0].ID, "c": res[3][2].ID} {
		j, err := s.Get(ctx, backend.GetParams{JID: jid})
		if err != nil || j.ID != want {
			t.Errorf("Get(jid %s) = %v, %v; want job %s", jid, j, err, want)
		}
	}
	if n := countJobs(t, s); n != 4 {
		t.Errorf("%d jobs in the table; want 4", n)
	}
	waitLine(t, s, "idle", func(m, g, c int) bool { return m == 0 && g == 0 && c == 0 })
}

// waitJIDWaiter waits until a session waits for the lock of jid in s.
func waitJIDWaiter(t *testing.T, s *Store, jid string) {
	t.Helper()
	key := uint64(s.jidLockKey(jid))
	deadline := time.Now().Add(waitBound)
	for {
		var n int
		err := s.Pool().QueryRow(t.Context(), `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 1`,
			int64(key>>32), int64(key&0xFFFFFFFF)).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no enqueue waits for the JID's lock")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestEnqueueTxJIDWaits: a JID enqueued in a caller's open transaction is
// held: an Enqueue of the same JID waits for that transaction, and is then
// a duplicate of its job if it commits, and a new job if it rolls back.
func TestEnqueueTxJIDWaits(t *testing.T) {
	for _, commit := range []bool{true, false} {
		name := map[bool]string{true: "commit", false: "rollback"}[commit]
		t.Run(name, func(t *testing.T) {
			txFlavours(t, func(t *testing.T, s *Store, begin func() (func(backend.EnqueueParams) (backend.EnqueueResult, error), func() error, func() error)) {
				enqueue, commitTx, rollbackTx := begin()
				p := txJob("tx", "")
				p.Jobs[0].JID = "shared"
				inTx, err := enqueue(p)
				if err != nil {
					t.Fatalf("EnqueueTx: %v", err)
				}
				type outcome struct {
					r   backend.EnqueueResult
					err error
				}
				done := make(chan outcome, 1)
				go func() {
					p := txJob("elsewhere", "")
					p.Jobs[0].JID = "shared"
					r, err := s.Enqueue(t.Context(), p)
					done <- outcome{r, err}
				}()
				waitJIDWaiter(t, s, "shared")
				end := rollbackTx
				if commit {
					end = commitTx
				}
				if err := end(); err != nil {
					t.Fatalf("end the transaction: %v", err)
				}
				var o outcome
				select {
				case o = <-done:
				case <-time.After(waitBound):
					t.Fatal("Enqueue did not return after the transaction ended")
				}
				if o.err != nil {
					t.Fatalf("Enqueue: %v", o.err)
				}
				got, first := o.r.Jobs[0], inTx.Jobs[0]
				switch {
				case commit && (!got.Duplicate || got.ID != first.ID):
					t.Fatalf("after the commit: %+v; want a duplicate of %s", got, first.ID)
				case !commit && got.Duplicate:
					t.Fatalf("after the rollback: %+v; want a new job", got)
				}
			})
		})
	}
}

// TestMigrateToJID: a schema at version 4 with a job in it is migrated;
// the job has no JID, jobs without one are many, and the JID rules hold.
func TestMigrateToJID(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	schema := testSchemaName(t)
	t.Cleanup(func() { dropSchema(t, url, schema) })
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	q := pgx.Identifier{schema}.Sanitize()
	stmts := []string{
		`CREATE SCHEMA ` + q,
		`CREATE TABLE ` + q + `.schema_versions (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)`,
	}
	for _, m := range ms[:4] {
		stmts = append(stmts, strings.ReplaceAll(m.sql, "{{schema}}", q),
			`INSERT INTO `+q+`.schema_versions VALUES (`+strconv.Itoa(m.version)+`, '`+m.name+`', now())`)
	}
	stmts = append(stmts, `INSERT INTO `+q+`.jobs (id, run_at, created_at, timeout_ns, max_attempts, priority, state, queue, type, payload)
		VALUES ('019a0000-0000-7000-8000-000000000001', '2026-11-21T10:00:00Z', '2026-11-21T10:00:00Z', 0, 3, 0, 'pending', 'old', 't', '\x7b7d')`)
	for _, stmt := range stmts {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("make a version 4 schema: %v", err)
		}
	}
	if _, err := Open(ctx, url, Options{Schema: schema}); !errors.Is(err, ErrNotMigrated) {
		t.Fatalf("Open of a version 4 schema without AutoMigrate: %v; want ErrNotMigrated", err)
	}
	from, to, err := Migrate(ctx, url, Options{Schema: schema})
	if err != nil || from != 4 || to != SchemaVersion() {
		t.Fatalf("Migrate = %d → %d, %v; want 4 → %d", from, to, err, SchemaVersion())
	}
	s, err := Open(ctx, url, Options{Schema: schema})
	if err != nil {
		t.Fatalf("Open after Migrate: %v", err)
	}
	defer s.Close()
	old, err := s.Get(ctx, backend.GetParams{ID: "019a0000-0000-7000-8000-000000000001"})
	if err != nil || old.JID != "" {
		t.Fatalf("migrated job: %+v, %v; want it without a JID", old, err)
	}
	now := time.Now()
	nj := backend.NewJob{Type: "t", Queue: "new", Payload: []byte(`{}`)}
	withJID := nj
	withJID.JID = "x"
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{nj, nj, withJID, withJID}})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Jobs
	if r[0].Duplicate || r[1].Duplicate || r[2].Duplicate || !r[3].Duplicate || r[3].ID != r[2].ID {
		t.Fatalf("Enqueue after the migration = %+v; want three new jobs and the fourth a duplicate of the third", r)
	}
	if j, err := s.Get(ctx, backend.GetParams{JID: "x"}); err != nil || j.ID != r[2].ID {
		t.Fatalf("Get(jid x) = %v, %v; want job %s", j, err, r[2].ID)
	}
}
