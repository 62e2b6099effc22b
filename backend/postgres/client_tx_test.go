package postgres

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
)

// clientClock is a fixed clock for the Client, at PostgreSQL's precision.
type clientClock time.Time

func (c clientClock) Now() time.Time { return time.Time(c) }

// clientTxFlavours runs a test of kyu.Client's transactional enqueue with
// a pgx transaction and with a database/sql one; begin opens a
// transaction that is rolled back at cleanup unless the test ends it.
func clientTxFlavours(t *testing.T, run func(t *testing.T, c *kyu.Client, s *Store, begin func() (tx any, commit, rollback func() error))) {
	t.Run("pgx", func(t *testing.T) {
		t.Parallel()
		s := openTestStore(t, Options{})
		c := kyu.NewClient(s, kyu.ClientConfig{Clock: clientClock(time.Now().UTC().Truncate(time.Microsecond))})
		run(t, c, s, func() (any, func() error, func() error) {
			tx, err := s.Pool().Begin(t.Context())
			if err != nil {
				t.Fatalf("Begin: %v", err)
			}
			t.Cleanup(func() { tx.Rollback(context.Background()) })
			return tx, func() error { return tx.Commit(t.Context()) }, func() error { return tx.Rollback(t.Context()) }
		})
	})
	t.Run("database-sql", func(t *testing.T) {
		t.Parallel()
		s := openTestStore(t, Options{})
		c := kyu.NewClient(s, kyu.ClientConfig{Clock: clientClock(time.Now().UTC().Truncate(time.Microsecond))})
		db, err := sql.Open("pgx", testURL(t))
		if err != nil {
			t.Fatalf("sql.Open: %v", err)
		}
		db.SetMaxOpenConns(2)
		t.Cleanup(func() { db.Close() })
		run(t, c, s, func() (any, func() error, func() error) {
			tx, err := db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatalf("BeginTx: %v", err)
			}
			t.Cleanup(func() { tx.Rollback() })
			return tx, tx.Commit, tx.Rollback
		})
	})
}

// TestClientEnqueueTxCommit: Client.EnqueueTx writes the job with
// Enqueue's options and mapping (Delay counted from the Client's clock)
// inside the caller's transaction: not there before the commit, there
// after it. A duplicate inside the transaction is reported as Enqueue
// reports it.
func TestClientEnqueueTxCommit(t *testing.T) {
	clientTxFlavours(t, func(t *testing.T, c *kyu.Client, s *Store, begin func() (any, func() error, func() error)) {
		ctx := t.Context()
		tx, commit, _ := begin()
		opts := kyu.EnqueueOptions{Queue: "client-tx", Delay: time.Hour, UniqueKey: "k", Title: "in tx"}
		res, err := c.EnqueueTx(ctx, tx, "tx.client", []byte(`{"n":1}`), opts)
		if err != nil {
			t.Fatalf("EnqueueTx: %v", err)
		}
		if res.Duplicate || res.State != kyu.StateScheduled {
			t.Fatalf("EnqueueTx = %+v; want a new scheduled job", res)
		}
		dup, err := c.EnqueueJSONTx(ctx, tx, "tx.client", map[string]int{"n": 2}, opts)
		if err != nil || !dup.Duplicate || dup.ID != res.ID {
			t.Fatalf("second EnqueueJSONTx with the key held = %+v, %v; want a duplicate of %s and no error", dup, err, res.ID)
		}
		if _, err := c.Get(ctx, res.ID); !errors.Is(err, kyu.ErrNotFound) {
			t.Fatalf("Get before commit = %v; want ErrNotFound", err)
		}
		if err := commit(); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		j, err := c.Get(ctx, res.ID)
		if err != nil {
			t.Fatalf("Get after commit: %v", err)
		}
		if want := j.CreatedAt.Add(time.Hour); !j.RunAt.Equal(want) || j.Title != "in tx" || string(j.Payload) != `{"n":1}` || j.MaxAttempts != 25 {
			t.Errorf("committed job: run_at %s (want %s), title %q, payload %s, max attempts %d", j.RunAt, want, j.Title, j.Payload, j.MaxAttempts)
		}
	})
}

// TestClientEnqueueTxRollback: jobs enqueued with EnqueueManyTx in a
// transaction that rolls back never exist, and their unique key is free.
func TestClientEnqueueTxRollback(t *testing.T) {
	clientTxFlavours(t, func(t *testing.T, c *kyu.Client, s *Store, begin func() (any, func() error, func() error)) {
		ctx := t.Context()
		tx, _, rollback := begin()
		res, err := c.EnqueueManyTx(ctx, tx, []kyu.JobSpec{
			{Type: "tx.client", EnqueueOptions: kyu.EnqueueOptions{Queue: "client-tx", UniqueKey: "k"}},
			{Type: "tx.client", EnqueueOptions: kyu.EnqueueOptions{Queue: "client-tx"}},
		})
		if err != nil || len(res) != 2 {
			t.Fatalf("EnqueueManyTx = %+v, %v", res, err)
		}
		if err := rollback(); err != nil {
			t.Fatalf("Rollback: %v", err)
		}
		for _, r := range res {
			if _, err := c.Get(ctx, r.ID); !errors.Is(err, kyu.ErrNotFound) {
				t.Errorf("Get %s after rollback = %v; want ErrNotFound", r.ID, err)
			}
		}
		again, err := c.Enqueue(ctx, "tx.client", nil, kyu.EnqueueOptions{Queue: "client-tx", UniqueKey: "k"})
		if err != nil || again.Duplicate {
			t.Errorf("Enqueue with the rolled-back key = %+v, %v; want a new job", again, err)
		}
	})
}

// TestClientEnqueueTxWrongType: a transaction the store cannot use is
// refused with ErrNotSupported naming the types it takes; the caller's
// transaction is untouched and can still commit.
func TestClientEnqueueTxWrongType(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	c := kyu.NewClient(s, kyu.ClientConfig{})
	ctx := t.Context()
	for _, tx := range []any{nil, "tx", s.Pool(), (*sql.Tx)(nil)} {
		_, err := c.EnqueueTx(ctx, tx, "tx.client", nil, kyu.EnqueueOptions{})
		if !errors.Is(err, kyu.ErrNotSupported) {
			t.Errorf("EnqueueTx with %T = %v; want ErrNotSupported", tx, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "pgx.Tx") || !strings.Contains(msg, "*sql.Tx") {
			t.Errorf("EnqueueTx with %T: %q does not name the types the store takes", tx, msg)
		}
	}
	// A validation error comes back as it is, inside a transaction too.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	_, err = c.EnqueueTx(ctx, tx, "tx.client", nil, kyu.EnqueueOptions{Delay: -time.Second})
	var verr *kyu.ValidationError
	if !errors.As(err, &verr) || verr.Field != "delay" {
		t.Errorf("EnqueueTx with a negative delay = %v; want a *ValidationError naming delay", err)
	}
	if _, err := c.EnqueueTx(ctx, tx, "tx.client", nil, kyu.EnqueueOptions{}); err != nil {
		t.Errorf("EnqueueTx after a refused call: %v; the transaction should be untouched", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Errorf("Commit after refused calls: %v", err)
	}
}
