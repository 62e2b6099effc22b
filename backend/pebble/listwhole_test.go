package pebble

import (
	"fmt"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestListWhole: ListWhole gives List's pages, each job as Get reads it
// (payload, result and log lines included), with List's filters.
func TestListWhole(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	ctx := t.Context()
	now := time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)
	var nj []backend.NewJob
	for i := range 60 {
		nj = append(nj, backend.NewJob{Type: "t", Queue: []string{"a", "b"}[i%2], Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), Retention: backend.RetainForever})
	}
	enqueue(t, s, now, nj...)
	for _, j := range claim(t, s, now, 10, "a") {
		if _, err := s.Report(ctx, backend.ReportParams{Items: []backend.ReportItem{{Lease: leaseOf(j), Logs: []string{"one", "two"}}}, Now: now}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: leaseOf(j), Result: []byte(`{"ok":true}`)}}, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	claim(t, s, now, 3, "b") // active jobs, listed too
	for _, p := range []backend.ListParams{
		{Order: backend.OldestFirst, Limit: 7},
		{Queue: "a", State: backend.StateCompleted, Order: backend.OldestFirst, Limit: 4},
		{Queue: "b", Order: backend.NewestFirst, Limit: 9},
	} {
		var listed, whole []*backend.Job
		for lp := p; ; {
			page, err := s.List(ctx, lp)
			if err != nil {
				t.Fatal(err)
			}
			listed = append(listed, page.Jobs...)
			if page.NextCursor == "" {
				break
			}
			lp.Cursor = page.NextCursor
		}
		for wp := p; ; {
			page, err := s.ListWhole(ctx, wp)
			if err != nil {
				t.Fatal(err)
			}
			whole = append(whole, page.Jobs...)
			if page.NextCursor == "" {
				break
			}
			wp.Cursor = page.NextCursor
		}
		if len(whole) != len(listed) || len(whole) == 0 {
			t.Fatalf("%+v: ListWhole gave %d jobs, List %d", p, len(whole), len(listed))
		}
		logged := 0
		for i, j := range whole {
			if j.ID != listed[i].ID {
				t.Fatalf("%+v: job %d is %s, List gives %s", p, i, j.ID, listed[i].ID)
			}
			if f := backend.SameJob(get(t, s, j.ID), j); f != "" {
				t.Fatalf("%+v: job %s: %s differs from Get's", p, j.ID, f)
			}
			if len(j.Logs) > 0 && len(j.Result) > 0 && len(j.Payload) > 0 {
				logged++
			}
		}
		if p.State == backend.StateCompleted && logged != len(whole) {
			t.Fatalf("%+v: %d of %d completed jobs came with payload, result and logs", p, logged, len(whole))
		}
	}
	if _, err := s.ListWhole(ctx, backend.ListParams{Limit: backend.MaxListLimit + 1}); err == nil {
		t.Fatal("ListWhole took a limit List refuses")
	}
}
