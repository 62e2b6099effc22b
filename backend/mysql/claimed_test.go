package mysql

import (
	"context"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestLeanCompleteCounts: a plain completion counts its jobs per queue
// alike whether this store claimed them (queues remembered), another
// store did (queues read from the rows), or this store remembers a wrong
// queue (the UPDATE refuses it and the general path completes the job).
func TestLeanCompleteCounts(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	other, err := Open(context.Background(), testURL(t), Options{Prefix: s.Prefix()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC)
	claim := func(by *Store, queue string, n int) []backend.CompleteItem {
		t.Helper()
		var jobs []backend.NewJob
		for range n {
			jobs = append(jobs, backend.NewJob{Type: "t", Queue: queue})
		}
		if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: now}); err != nil {
			t.Fatal(err)
		}
		cl, err := by.Claim(ctx, backend.ClaimParams{Queues: []string{queue}, Max: n, Lease: time.Minute, Now: now})
		if err != nil || len(cl.Jobs) != n {
			t.Fatalf("Claim = %v, %v; want %d jobs", cl.Jobs, err, n)
		}
		var items []backend.CompleteItem
		for _, j := range cl.Jobs {
			items = append(items, backend.CompleteItem{Lease: backend.Lease{JobID: j.ID, Token: j.LeaseToken}})
		}
		return items
	}
	complete := func(items []backend.CompleteItem, lean bool) {
		t.Helper()
		before := s.leanCompletes.Load()
		res, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range res.Errors {
			if e != nil {
				t.Fatalf("Complete item %d: %v", i, e)
			}
		}
		if got := s.leanCompletes.Load() > before; got != lean {
			t.Fatalf("lean completion %v; want %v", got, lean)
		}
	}
	// Claimed here, two queues in one batch.
	complete(append(claim(s, "a", 3), claim(s, "b", 2)...), true)
	// Claimed by another store: this one does not know the queues.
	complete(claim(other, "a", 2), true)
	// A wrong queue remembered: refused by the UPDATE, done the general way.
	wrong := claim(other, "b", 1)
	s.claimed.add(wrong[0].Lease.JobID, "a")
	complete(wrong, false)

	want := map[string]int64{"a": 5, "b": 3}
	for table, col := range map[string]string{"final_counts": "n", "queue_counters": "processed"} {
		rows, err := s.DB().QueryContext(ctx, `SELECT queue, sum(`+col+`) FROM `+s.table(table)+` GROUP BY queue`)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for rows.Next() {
			var q string
			var n int64
			if err := rows.Scan(&q, &n); err != nil {
				t.Fatal(err)
			}
			got[q] = n
		}
		rows.Close()
		if len(got) != len(want) || got["a"] != want["a"] || got["b"] != want["b"] {
			t.Errorf("%s counts %v; want %v", table, got, want)
		}
	}
	var processed int64
	if err := s.DB().QueryRowContext(ctx, `SELECT sum(processed) FROM `+s.table("counters")).Scan(&processed); err != nil {
		t.Fatal(err)
	}
	if processed != 8 {
		t.Errorf("counters count %d processed; want 8", processed)
	}
	if n := len(s.claimed.m); n != 0 {
		t.Errorf("the store still remembers %d claimed jobs after their completions", n)
	}
}
