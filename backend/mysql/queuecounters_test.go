package mysql

import (
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestQueueCounters: the one-statement completion counts in its queue's
// minute as the general path does, and ApplyRetention deletes the
// queue_counters rows older than backend.QueueStatsHistory and no others.
func TestQueueCounters(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC)
	complete := func(queue string, result []byte, at time.Time) {
		t.Helper()
		if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "t", Queue: queue}}, Now: at}); err != nil {
			t.Fatal(err)
		}
		cl, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{queue}, Max: 1, Lease: time.Minute, Now: at})
		if err != nil || len(cl.Jobs) != 1 {
			t.Fatalf("Claim = %v, %v", cl.Jobs, err)
		}
		j := cl.Jobs[0]
		res, err := s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: j.ID, Token: j.LeaseToken}, Result: result}}, Now: at})
		if err != nil || res.Errors[0] != nil {
			t.Fatalf("Complete = %v, %v", res.Errors, err)
		}
	}
	before := s.leanCompletes.Load()
	complete("a", nil, now)
	if s.leanCompletes.Load() == before {
		t.Fatal("a completion without a result took the general path; want the lean one")
	}
	complete("a", []byte("r"), now)
	complete("b", nil, now.Add(2*time.Hour))
	rows := func() int {
		t.Helper()
		var n int
		if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM `+s.table("queue_counters")).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	st, err := s.Stats(ctx, backend.StatsParams{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range st.Queues {
		if q.Name == "a" && (q.LastFiveMinutes != backend.AttemptCount{Processed: 2}) {
			t.Fatalf("queue a counts %+v in its last 5 minutes; want 2 processed (lean and general)", q.LastFiveMinutes)
		}
	}
	if n := rows(); n < 2 {
		t.Fatalf("%d queue_counters rows; want a's and b's", n)
	}
	if _, err := s.ApplyRetention(ctx, backend.MaintenanceParams{Now: now.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var queues []string
	r, err := s.DB().QueryContext(ctx, `SELECT DISTINCT queue FROM `+s.table("queue_counters"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for r.Next() {
		var q string
		if err := r.Scan(&q); err != nil {
			t.Fatal(err)
		}
		queues = append(queues, q)
	}
	if len(queues) != 1 || queues[0] != "b" {
		t.Fatalf("after ApplyRetention two hours on, queue_counters holds queues %v; want only b's recent minute", queues)
	}
}
