package postgres

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

// waitBound bounds every wait in these tests; waits end as soon as what
// they wait for happens.
const waitBound = 10 * time.Second

// txJob is one job for the transaction tests.
func txJob(queue, key string) backend.EnqueueParams {
	return backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{{Type: "tx.test", Queue: queue, UniqueKey: key, Payload: []byte(`{}`)}}}
}

// subscribeTest opens a subscription closed with the test.
func subscribeTest(t *testing.T, s *Store, queues ...string) *backend.Subscription {
	t.Helper()
	sub, err := s.Subscribe(t.Context(), backend.SubscribeParams{Queues: queues})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	t.Cleanup(sub.Close)
	return sub
}

// signalled reports whether sub has a signal waiting, without waiting.
func signalled(sub *backend.Subscription) bool {
	select {
	case <-sub.C:
		return true
	default:
		return false
	}
}

// txFlavours runs a test with a pgx transaction and with a database/sql one.
func txFlavours(t *testing.T, run func(t *testing.T, s *Store, begin func() (enqueue func(backend.EnqueueParams) (backend.EnqueueResult, error), commit, rollback func() error))) {
	t.Run("pgx", func(t *testing.T) {
		t.Parallel()
		s := openTestStore(t, Options{})
		run(t, s, func() (func(backend.EnqueueParams) (backend.EnqueueResult, error), func() error, func() error) {
			tx, err := s.Pool().Begin(t.Context())
			if err != nil {
				t.Fatalf("Begin: %v", err)
			}
			t.Cleanup(func() { tx.Rollback(context.Background()) })
			return func(p backend.EnqueueParams) (backend.EnqueueResult, error) { return s.EnqueueTx(t.Context(), tx, p) },
				func() error { return tx.Commit(t.Context()) },
				func() error { return tx.Rollback(t.Context()) }
		})
	})
	t.Run("database-sql", func(t *testing.T) {
		t.Parallel()
		s := openTestStore(t, Options{})
		db, err := sql.Open("pgx", testURL(t))
		if err != nil {
			t.Fatalf("sql.Open: %v", err)
		}
		db.SetMaxOpenConns(2)
		t.Cleanup(func() { db.Close() })
		run(t, s, func() (func(backend.EnqueueParams) (backend.EnqueueResult, error), func() error, func() error) {
			tx, err := db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatalf("BeginTx: %v", err)
			}
			t.Cleanup(func() { tx.Rollback() })
			return func(p backend.EnqueueParams) (backend.EnqueueResult, error) {
					return s.EnqueueTx(t.Context(), tx, p)
				},
				tx.Commit, tx.Rollback
		})
	})
}

// TestEnqueueTxCommit: a job enqueued in a transaction is invisible until
// the commit, and then wakes an idle worker (its poll interval is far
// longer than the wait) that runs it.
func TestEnqueueTxCommit(t *testing.T) {
	txFlavours(t, func(t *testing.T, s *Store, begin func() (func(backend.EnqueueParams) (backend.EnqueueResult, error), func() error, func() error)) {
		const queue = "tx-commit"
		ran := make(chan string, 1)
		w, err := kyu.NewWorker(s, kyu.WorkerConfig{
			Queues:       map[string]int{queue: 1},
			PollInterval: 10 * time.Minute,
			Handler: kyu.HandlerFunc(func(ctx context.Context, j *kyu.Job) error {
				ran <- j.ID
				return nil
			}),
		})
		if err != nil {
			t.Fatalf("NewWorker: %v", err)
		}
		if err := w.Start(t.Context()); err != nil {
			t.Fatalf("Start: %v", err)
		}
		t.Cleanup(func() { w.Shutdown(context.Background()) })
		sub := subscribeTest(t, s, queue)

		enqueue, commit, _ := begin()
		res, err := enqueue(txJob(queue, "once"))
		if err != nil {
			t.Fatalf("enqueue in transaction: %v", err)
		}
		id := res.Jobs[0].ID
		if _, err := s.Get(t.Context(), backend.GetParams{ID: id}); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("Get before commit = %v; want ErrNotFound (the job exists only once the transaction commits)", err)
		}
		if signalled(sub) {
			t.Fatal("a subscriber was woken before the commit")
		}
		if err := commit(); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		select {
		case <-sub.C:
		case <-time.After(waitBound):
			t.Fatalf("no wake-up within %s of the commit", waitBound)
		}
		select {
		case got := <-ran:
			if got != id {
				t.Fatalf("worker ran %s; want %s", got, id)
			}
		case <-time.After(waitBound):
			t.Fatalf("the idle worker did not run the committed job within %s", waitBound)
		}
		deadline := time.Now().Add(waitBound)
		for {
			j, err := s.Get(t.Context(), backend.GetParams{ID: id})
			if err != nil {
				t.Fatalf("Get after commit: %v", err)
			}
			if j.State == backend.StateCompleted {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job is %s %s after it ran; want completed", j.State, waitBound)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// TestEnqueueTxRollback: a job enqueued in a transaction that rolls back
// never exists, holds no unique key, and wakes no one. A later job in
// another queue, notified after the rollback, proves the notifications up
// to then have all been handed out.
func TestEnqueueTxRollback(t *testing.T) {
	txFlavours(t, func(t *testing.T, s *Store, begin func() (func(backend.EnqueueParams) (backend.EnqueueResult, error), func() error, func() error)) {
		const queue, marker = "tx-rollback", "tx-marker"
		sub := subscribeTest(t, s, queue)
		markerSub := subscribeTest(t, s, marker)

		enqueue, _, rollback := begin()
		res, err := enqueue(txJob(queue, "k"))
		if err != nil {
			t.Fatalf("enqueue in transaction: %v", err)
		}
		id := res.Jobs[0].ID
		if err := rollback(); err != nil {
			t.Fatalf("Rollback: %v", err)
		}
		if _, err := s.Get(t.Context(), backend.GetParams{ID: id}); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("Get after rollback = %v; want ErrNotFound", err)
		}

		// The marker goes through a committed transaction of its own, so
		// its wake-up comes only through NOTIFY, after any the rolled-back
		// transaction could have sent.
		tx, err := s.Pool().Begin(t.Context())
		if err != nil {
			t.Fatalf("Begin: %v", err)
		}
		if _, err := s.EnqueueTx(t.Context(), tx, txJob(marker, "")); err != nil {
			t.Fatalf("marker: %v", err)
		}
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatalf("marker commit: %v", err)
		}
		select {
		case <-markerSub.C:
		case <-time.After(waitBound):
			t.Fatalf("no wake-up for the marker within %s", waitBound)
		}
		if signalled(sub) {
			t.Fatal("the rolled-back enqueue woke a subscriber")
		}

		got, err := s.Claim(t.Context(), backend.ClaimParams{Queues: []string{queue}, Max: 10, Lease: time.Minute, Now: time.Now()})
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		if len(got.Jobs) != 0 {
			t.Fatalf("Claim after rollback returned %d jobs; want none", len(got.Jobs))
		}
		again, err := s.Enqueue(t.Context(), txJob(queue, "k"))
		if err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		if again.Jobs[0].Duplicate {
			t.Fatalf("the unique key of the rolled-back job is held by %s; want it free", again.Jobs[0].ID)
		}
	})
}

// TestEnqueueTxUniqueVisibleInTx: within the transaction, a second enqueue
// of the same key sees the first as its holder.
func TestEnqueueTxUniqueVisibleInTx(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	tx, err := s.Pool().Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	first, err := s.EnqueueTx(t.Context(), tx, txJob("q", "k"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.EnqueueTx(t.Context(), tx, txJob("q", "k"))
	if err != nil {
		t.Fatal(err)
	}
	if !second.Jobs[0].Duplicate || second.Jobs[0].ID != first.Jobs[0].ID {
		t.Fatalf("second enqueue of the key in one transaction = %+v; want a duplicate of %s", second.Jobs[0], first.Jobs[0].ID)
	}
}

// TestEnqueueTxWrongType: a transaction of a type the store cannot use,
// or a nil one, is refused with an error naming the types it takes, and
// nothing is written.
func TestEnqueueTxWrongType(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	for _, tx := range []any{nil, (*sql.Tx)(nil), s.Pool(), "tx"} {
		_, err := s.EnqueueTx(t.Context(), tx, txJob("wrong", ""))
		if !errors.Is(err, backend.ErrNotSupported) {
			t.Errorf("EnqueueTx with %T = %v; want ErrNotSupported", tx, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "pgx.Tx") || !strings.Contains(msg, "*sql.Tx") {
			t.Errorf("EnqueueTx with %T: %q does not name the types the store takes", tx, msg)
		}
	}
	res, err := s.List(t.Context(), backend.ListParams{Queue: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Jobs) != 0 {
		t.Errorf("refused EnqueueTx calls wrote %d jobs", len(res.Jobs))
	}
}
