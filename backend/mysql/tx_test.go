package mysql

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

// clientClock is a fixed clock for the Client, at the store's precision.
type clientClock time.Time

func (c clientClock) Now() time.Time { return time.Time(c) }

// txClient opens a store, a Client on it and a plain database/sql pool
// on the same database, as an application has.
func txClient(t *testing.T) (*kyu.Client, *Store, *sql.DB) {
	t.Helper()
	s := openTestStore(t, Options{})
	c := kyu.NewClient(s, kyu.ClientConfig{Clock: clientClock(time.Now().UTC().Truncate(time.Microsecond))})
	db, err := openRaw(testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(4)
	t.Cleanup(func() { db.Close() })
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE IF NOT EXISTS `"+s.Prefix()+"app` (id INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.ExecContext(context.Background(), "DROP TABLE IF EXISTS `"+s.Prefix()+"app`") })
	return c, s, db
}

// TestClientEnqueueTxCommit: a job enqueued in the application's
// transaction, beside its own row, is invisible to Get and to claims until
// the commit, and there (and claimable) after it; a duplicate in the same
// transaction is reported as Enqueue reports it.
func TestClientEnqueueTxCommit(t *testing.T) {
	t.Parallel()
	c, s, db := txClient(t)
	ctx := t.Context()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "INSERT INTO `"+s.Prefix()+"app` (id) VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	opts := kyu.EnqueueOptions{Queue: "client-tx", UniqueKey: "k", Title: "in tx"}
	res, err := c.EnqueueTx(ctx, tx, "tx.client", []byte(`{"n":1}`), opts)
	if err != nil {
		t.Fatalf("EnqueueTx: %v", err)
	}
	if res.Duplicate || res.State != kyu.StatePending {
		t.Fatalf("EnqueueTx = %+v; want a new pending job", res)
	}
	dup, err := c.EnqueueTx(ctx, tx, "tx.client", nil, opts)
	if err != nil || !dup.Duplicate || dup.ID != res.ID {
		t.Fatalf("second EnqueueTx with the key held = %+v, %v; want a duplicate of %s", dup, err, res.ID)
	}
	if _, err := c.Get(ctx, res.ID); !errors.Is(err, kyu.ErrNotFound) {
		t.Fatalf("Get before commit = %v; want ErrNotFound", err)
	}
	now := time.Now().UTC()
	cl, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"client-tx"}, Max: 10, Lease: time.Minute, Now: now})
	if err != nil || len(cl.Jobs) != 0 {
		t.Fatalf("Claim before commit = %d jobs, %v; want none", len(cl.Jobs), err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	j, err := c.Get(ctx, res.ID)
	if err != nil || j.Title != "in tx" || string(j.Payload) != `{"n":1}` {
		t.Fatalf("Get after commit = %+v, %v", j, err)
	}
	cl, err = s.Claim(ctx, backend.ClaimParams{Queues: []string{"client-tx"}, Max: 10, Lease: time.Minute, Now: now})
	if err != nil || len(cl.Jobs) != 1 || cl.Jobs[0].ID != res.ID {
		t.Fatalf("Claim after commit = %+v, %v; want the job", cl.Jobs, err)
	}
}

// TestClientEnqueueTxRollback: a job enqueued in a transaction that rolls
// back never exists, its unique key is free again, and the application's
// row is gone with it.
func TestClientEnqueueTxRollback(t *testing.T) {
	t.Parallel()
	c, s, db := txClient(t)
	ctx := t.Context()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO `"+s.Prefix()+"app` (id) VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	opts := kyu.EnqueueOptions{Queue: "client-tx", UniqueKey: "k"}
	res, err := c.EnqueueTx(ctx, tx, "tx.client", nil, opts)
	if err != nil {
		t.Fatalf("EnqueueTx: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, res.ID); !errors.Is(err, kyu.ErrNotFound) {
		t.Fatalf("Get after rollback = %v; want ErrNotFound", err)
	}
	st, err := s.Stats(ctx, backend.StatsParams{Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range st.Queues {
		for state, n := range q.Counts {
			if n != 0 {
				t.Fatalf("after rollback the store counts %d %s jobs in %s", n, state, q.Name)
			}
		}
	}
	again, err := c.Enqueue(ctx, "tx.client", nil, opts)
	if err != nil || again.Duplicate {
		t.Fatalf("Enqueue with the rolled-back key = %+v, %v; want a new job", again, err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM `"+s.Prefix()+"app`").Scan(&n); err != nil || n != 0 {
		t.Fatalf("application rows after rollback = %d, %v; want 0", n, err)
	}
}

// TestEnqueueTxWrongType: a tx of another type, or a nil one, is refused
// with ErrNotSupported and nothing is written.
func TestEnqueueTxWrongType(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	var nilTx *sql.Tx
	for _, tx := range []any{nil, nilTx, "tx", s.DB()} {
		_, err := s.EnqueueTx(t.Context(), tx, backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "t"}}, Now: time.Now()})
		if !errors.Is(err, backend.ErrNotSupported) {
			t.Fatalf("EnqueueTx(%T) = %v; want ErrNotSupported", tx, err)
		}
	}
	l, err := s.List(t.Context(), backend.ListParams{})
	if err != nil || len(l.Jobs) != 0 {
		t.Fatalf("List = %d jobs, %v; want none", len(l.Jobs), err)
	}
}

// TestEnqueueTxWakesAfterCommit: a subscriber of the queue, in this
// process or another, is woken once the transaction commits.
func TestEnqueueTxWakesAfterCommit(t *testing.T) {
	t.Parallel()
	c, s, db := txClient(t)
	other, err := Open(t.Context(), testURL(t), Options{Prefix: s.Prefix(), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	sub, err := other.Subscribe(t.Context(), backend.SubscribeParams{Queues: []string{"woken"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnqueueTx(t.Context(), tx, "t", nil, kyu.EnqueueOptions{Queue: "woken"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.C:
	case <-time.After(5 * time.Second):
		t.Fatal("the other store's subscriber was not woken within 5s of the commit")
	}
}
