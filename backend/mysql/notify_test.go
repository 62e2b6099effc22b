package mysql

import (
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestBumpStatementNone: a round of the bump loop with no queue left (an
// earlier round took them) sends nothing; with queues, one row each, in
// queue order.
func TestBumpStatementNone(t *testing.T) {
	t.Parallel()
	g := newSignals(&store{sqls: newStatements("p_")})
	if q, args, ok := g.bumpStatement(nil); ok {
		t.Fatalf("bumpStatement(nil) = %q, %v; want none", q, args)
	}
	q, args, ok := g.bumpStatement([]string{"b", "a"})
	if !ok || strings.Count(q, "(?, ?, 1)") != 2 || len(args) != 4 || args[0] != "a" || args[2] != "b" {
		t.Fatalf("bumpStatement(b, a) = %q, %v, %v; want two rows, a first", q, args, ok)
	}
}

// TestPlainEnqueueWakes: a batch enqueued by one INSERT wakes a
// subscriber of the queue in this store and in another, and a subscriber
// of another queue in neither, and bumps the queue's version once.
func TestPlainEnqueueWakes(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	other, err := Open(t.Context(), testURL(t), Options{Prefix: s.Prefix(), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var subs []*backend.Subscription
	for _, st := range []*Store{s, other} {
		sub, err := st.Subscribe(t.Context(), backend.SubscribeParams{Queues: []string{"woken"}})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		subs = append(subs, sub)
	}
	quiet, err := s.Subscribe(t.Context(), backend.SubscribeParams{Queues: []string{"quiet"}})
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Close()
	jobs := []backend.NewJob{{Type: "t", Queue: "woken"}, {Type: "t", Queue: "woken"}}
	res, err := s.Enqueue(t.Context(), backend.EnqueueParams{Jobs: jobs, Now: time.Now()})
	if err != nil || len(res.Jobs) != 2 {
		t.Fatalf("Enqueue = %+v, %v", res, err)
	}
	for i, sub := range subs {
		select {
		case <-sub.C:
		case <-time.After(5 * time.Second):
			t.Fatalf("subscriber %d was not woken within 5s of the enqueue", i)
		}
	}
	select {
	case <-quiet.C:
		t.Fatal("a subscriber of another queue was woken")
	default:
	}
	var sum int64
	if err := s.db.QueryRowContext(t.Context(), "SELECT COALESCE(sum(version), 0) FROM "+s.table("signals")+" WHERE queue = 'woken'").Scan(&sum); err != nil || sum != 1 {
		t.Fatalf("version of woken = %d, %v; want 1", sum, err)
	}
}
