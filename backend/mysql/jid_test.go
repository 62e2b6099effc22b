package mysql

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// enqueueJIDs enqueues jobs with the JIDs given ("" for none) and checks
// that the ones marked dup are duplicates of the job before them and the
// others new jobs; it returns the results.
func enqueueJIDs(t *testing.T, s *Store, jids []string, dup []bool) []backend.EnqueuedJob {
	t.Helper()
	var jobs []backend.NewJob
	for _, jid := range jids {
		jobs = append(jobs, backend.NewJob{Type: "t", Queue: "new", Payload: []byte(`{}`), JID: jid})
	}
	res, err := s.Enqueue(t.Context(), backend.EnqueueParams{Now: time.Now(), Jobs: jobs})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	for i, r := range res.Jobs {
		if r.Duplicate != dup[i] || dup[i] && r.ID != res.Jobs[i-1].ID {
			t.Fatalf("Enqueue of jids %q = %+v; want duplicates %v, each of the job before it", jids, res.Jobs, dup)
		}
	}
	return res.Jobs
}

// TestMigrateToJID: tables at version 3 with a job in them are migrated;
// the job has no JID, jobs without one are many, and the JID rules hold.
// A jobs table dropped after that is made again with its JID.
func TestMigrateToJID(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	prefix := testPrefix(t)
	t.Cleanup(func() { dropTables(t, url, prefix) })
	ctx := t.Context()
	db, err := openRaw(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	stmts := []string{"CREATE TABLE `" + prefix + "schema_versions` (version INT NOT NULL PRIMARY KEY, name VARCHAR(255) NOT NULL, applied_at BIGINT NOT NULL)"}
	for _, m := range ms[:3] {
		stmts = append(stmts, statementsOf(strings.ReplaceAll(m.sql, "{{p}}", prefix))...)
		stmts = append(stmts, "INSERT INTO `"+prefix+"schema_versions` VALUES ("+strconv.Itoa(m.version)+", '"+m.name+"', 0)")
	}
	stmts = append(stmts, "INSERT INTO `"+prefix+"jobs` (id, queue, state, priority, run_at, type, title, max_attempts, timeout_ns, created_at, payload)"+
		" VALUES ('019a0000-0000-7000-8000-000000000001', 'old', 'pending', 0, 0, 't', '', 3, 0, 0, '{}')")
	for _, stmt := range stmts {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("make version 3 tables: %v", err)
		}
	}
	if _, err := Open(ctx, url, Options{Prefix: prefix}); !errors.Is(err, ErrNotMigrated) {
		t.Fatalf("Open of version 3 tables without AutoMigrate: %v; want ErrNotMigrated", err)
	}
	from, to, err := Migrate(ctx, url, Options{Prefix: prefix})
	if err != nil || from != 3 || to != SchemaVersion() {
		t.Fatalf("Migrate = %d → %d, %v; want 3 → %d", from, to, err, SchemaVersion())
	}
	s, err := Open(ctx, url, Options{Prefix: prefix})
	if err != nil {
		t.Fatalf("Open after Migrate: %v", err)
	}
	old, err := s.Get(ctx, backend.GetParams{ID: "019a0000-0000-7000-8000-000000000001"})
	if err != nil || old.JID != "" {
		t.Fatalf("migrated job: %+v, %v; want it without a JID", old, err)
	}
	// JIDs compare byte for byte: "x " is not "x", nor "X".
	r := enqueueJIDs(t, s, []string{"", "", "x", "x", "x ", "X"}, []bool{false, false, false, true, false, false})
	if j, err := s.Get(ctx, backend.GetParams{JID: "x"}); err != nil || j.ID != r[2].ID {
		t.Fatalf("Get(jid x) = %v, %v; want job %s", j, err, r[2].ID)
	}
	s.Close()

	if _, err := db.ExecContext(ctx, "DROP TABLE `"+prefix+"jobs`"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Migrate(ctx, url, Options{Prefix: prefix}); err != nil {
		t.Fatalf("Migrate of tables without jobs: %v", err)
	}
	s, err = Open(ctx, url, Options{Prefix: prefix})
	if err != nil {
		t.Fatalf("Open after the jobs table was made again: %v", err)
	}
	defer s.Close()
	enqueueJIDs(t, s, []string{"x", "x"}, []bool{false, true})
}

// TestEnqueueTxJIDWaits: a JID enqueued in an application's open
// transaction is held: an Enqueue of the same JID waits for that
// transaction, and is then a duplicate of its job if it commits, and a
// new job if it rolls back.
func TestEnqueueTxJIDWaits(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		_, s, db := txClient(t)
		ctx := t.Context()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		job := func(queue string) backend.EnqueueParams {
			return backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{{Type: "t", Queue: queue, Payload: []byte(`{}`), JID: "shared"}}}
		}
		inTx, err := s.EnqueueTx(ctx, tx, job("tx"))
		if err != nil {
			tx.Rollback()
			t.Fatalf("EnqueueTx: %v", err)
		}
		type outcome struct {
			r   backend.EnqueueResult
			err error
		}
		done := make(chan outcome, 1)
		go func() {
			r, err := s.Enqueue(ctx, job("elsewhere"))
			done <- outcome{r, err}
		}()
		waitLockWait(t, s)
		end := tx.Rollback
		if commit {
			end = tx.Commit
		}
		if err := end(); err != nil {
			t.Fatalf("end the transaction: %v", err)
		}
		var o outcome
		select {
		case o = <-done:
		case <-time.After(30 * time.Second):
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
	}
}

// waitLockWait waits until a transaction on s's jobs table waits for a
// lock.
func waitLockWait(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := s.DB().QueryRowContext(t.Context(), `SELECT count(*) FROM information_schema.innodb_trx
			WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE ?`, "%"+s.Prefix()+"jobs%").Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no enqueue waits for the JID's row")
		}
		// The server refreshes innodb_trx only when it was not read for
		// a tenth of a second.
		time.Sleep(150 * time.Millisecond)
	}
}
