package pebble

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

func TestRetryRunNowPurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, t.TempDir(), Options{})

	// A failed job with a unique key comes back pending with one more
	// attempt; while another job holds its key, Retry is refused.
	id := enqueue(t, s, t0, backend.NewJob{Queue: "r", UniqueKey: "k", MaxAttempts: 1, Retention: backend.RetainForever})[0].ID
	j := claim(t, s, t0, 1, "r")[0]
	res, err := s.Fail(ctx, backend.FailParams{Items: []backend.FailItem{{Lease: leaseOf(j), Message: "x"}}, Now: t0})
	mustOK(t, "Fail", res, err)
	other := enqueue(t, s, t0, backend.NewJob{Queue: "r", UniqueKey: "k"})[0]
	if other.Duplicate {
		t.Fatal("the key of a failed job still held")
	}
	if _, err := s.Retry(ctx, backend.RetryParams{ID: id, Now: t0}); !errors.Is(err, backend.ErrUniqueKeyHeld) {
		t.Fatalf("Retry while the key is held elsewhere = %v; want ErrUniqueKeyHeld", err)
	}
	if g := get(t, s, id); g.State != backend.StateFailed {
		t.Fatalf("a refused Retry changed the job to %s", g.State)
	}
	if err := s.Delete(ctx, backend.DeleteParams{ID: other.ID, Now: t0}); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Minute)
	r, err := s.Retry(ctx, backend.RetryParams{ID: id, Now: later})
	if err != nil || r.State != backend.StatePending || r.MaxAttempts != 2 || r.Attempt != 1 || !r.RunAt.Equal(later) || !r.FinishedAt.IsZero() || !r.ExpiresAt.IsZero() {
		t.Fatalf("Retry = %+v, %v", r, err)
	}
	if e := enqueue(t, s, t0, backend.NewJob{Queue: "r", UniqueKey: "k"})[0]; !e.Duplicate || e.ID != id {
		t.Fatalf("after Retry the key is not held by the job again: %+v", e)
	}
	if _, err := s.Retry(ctx, backend.RetryParams{ID: id, Now: later}); !errors.Is(err, backend.ErrWrongState) {
		t.Fatalf("Retry of a pending job = %v; want ErrWrongState", err)
	}

	// RunNow of a scheduled job.
	sched := enqueue(t, s, t0, backend.NewJob{Queue: "s", RunAt: t0.Add(time.Hour)})[0].ID
	if r, err := s.RunNow(ctx, backend.RunNowParams{ID: sched, Now: t0}); err != nil || r.State != backend.StatePending || !r.RunAt.Equal(t0) {
		t.Fatalf("RunNow = %+v, %v", r, err)
	}
	if got := claim(t, s, t0, 5, "s"); len(got) != 1 || got[0].ID != sched {
		t.Fatalf("claimed %d after RunNow; want the job", len(got))
	}
	if _, err := s.RunNow(ctx, backend.RunNowParams{ID: "00000000-0000-7000-8000-000000000000", Now: t0}); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("RunNow of an unknown id = %v", err)
	}

	// Purge and RetryQueue work oldest first, a batch at a time.
	var ids []string
	for range 5 {
		ids = append(ids, enqueue(t, s, t0, backend.NewJob{Queue: "b", MaxAttempts: 1, Retention: backend.RetainForever})[0].ID)
	}
	for _, j := range claim(t, s, t0, 5, "b") {
		res, err := s.Fail(ctx, backend.FailParams{Items: []backend.FailItem{{Lease: leaseOf(j)}}, Now: t0})
		mustOK(t, "Fail", res, err)
	}
	c, err := s.RetryQueue(ctx, backend.RetryQueueParams{Queue: "b", State: backend.StateFailed, Limit: 2, Now: t0})
	if err != nil || c.Count != 2 {
		t.Fatalf("RetryQueue = %+v, %v; want 2", c, err)
	}
	for i, id := range ids {
		want := backend.StateFailed
		if i < 2 {
			want = backend.StatePending
		}
		if g := get(t, s, id); g.State != want {
			t.Fatalf("job %d after RetryQueue is %s; want %s (oldest first)", i, g.State, want)
		}
	}
	c, err = s.Purge(ctx, backend.PurgeParams{Queue: "b", State: backend.StateFailed, Limit: 10, Now: t0})
	if err != nil || c.Count != 3 {
		t.Fatalf("Purge = %+v, %v; want 3", c, err)
	}
	if _, err := s.Purge(ctx, backend.PurgeParams{Queue: "b", State: backend.StateActive, Limit: 10, Now: t0}); err == nil {
		t.Fatal("Purge of active jobs was accepted")
	}
	st, err := s.Stats(ctx, backend.StatsParams{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if q := findQueue(t, st, "b"); q.Counts[backend.StateFailed] != 0 || q.Counts[backend.StatePending] != 2 || !q.OldestPending.Equal(t0) {
		t.Fatalf("queue b after purge: %v oldest %s", q.Counts, q.OldestPending)
	}
}

func TestWatchFinishedHearsEveryEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, t.TempDir(), Options{})
	watch := func(id string) *backend.Subscription {
		t.Helper()
		sub, err := s.WatchFinished(ctx, backend.WatchParams{IDs: []string{id}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sub.Close)
		return sub
	}
	id := enqueue(t, s, t0, backend.NewJob{Queue: "a", Retention: backend.RetainFor(time.Hour)})[0].ID
	sub := watch(id)
	j := claim(t, s, t0, 1, "a")[0]
	if _, err := s.Heartbeat(ctx, backend.HeartbeatParams{Leases: []backend.Lease{leaseOf(j)}, Extend: time.Minute, Now: t0}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.C:
		t.Fatal("signalled before the job finished")
	default:
	}
	res0, err0 := s.completeOne(ctx, j)
	mustOK(t, "Complete", res0, err0)
	signalled(t, sub.C, "completion")
	if _, err := s.ApplyRetention(ctx, backend.MaintenanceParams{Now: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	signalled(t, sub.C, "deletion by retention")

	for name, end := range map[string]func(id string) error{
		"cancel": func(id string) error { _, err := s.Cancel(ctx, backend.CancelParams{ID: id, Now: t0}); return err },
		"delete": func(id string) error { return s.Delete(ctx, backend.DeleteParams{ID: id, Now: t0}) },
		"purge": func(string) error {
			_, err := s.Purge(ctx, backend.PurgeParams{Queue: "w-purge", State: backend.StatePending, Limit: 1, Now: t0})
			return err
		},
		"deadline": func(string) error {
			_, err := s.Promote(ctx, backend.MaintenanceParams{Now: t0.Add(time.Hour)})
			return err
		},
	} {
		nj := backend.NewJob{Queue: "w-" + name}
		if name == "deadline" {
			nj.Deadline = t0.Add(time.Minute)
		}
		id := enqueue(t, s, t0, nj)[0].ID
		sub := watch(id)
		if err := end(id); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		signalled(t, sub.C, name)
	}
}

func TestListPagesAndStatsAgree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, t.TempDir(), Options{})
	want := map[string][]string{} // filter → ids in order
	for i := range 30 {
		q := fmt.Sprintf("q%d", i%3)
		nj := backend.NewJob{Queue: q, Type: fmt.Sprintf("t%d", i%2), Title: fmt.Sprintf("Job %d", i), Retention: backend.RetainForever}
		id := enqueue(t, s, t0, nj)[0].ID
		want[""] = append(want[""], id)
		want["queue="+q] = append(want["queue="+q], id)
		want["type="+nj.Type] = append(want["type="+nj.Type], id)
	}
	// Some of q0 complete.
	for _, j := range claim(t, s, t0, 4, "q0") {
		res0, err0 := s.completeOne(ctx, j)
		mustOK(t, "Complete", res0, err0)
		want["queue=q0,state=completed"] = append(want["queue=q0,state=completed"], j.ID)
		want["state=completed"] = append(want["state=completed"], j.ID)
	}
	// Two of q1 stay active: List finds them through the leases.
	for _, j := range claim(t, s, t0, 2, "q1") {
		want["state=active"] = append(want["state=active"], j.ID)
	}
	page := func(p backend.ListParams) []string {
		t.Helper()
		var ids []string
		for n := 0; ; n++ {
			res, err := s.List(ctx, p)
			if err != nil {
				t.Fatalf("List %+v: %v", p, err)
			}
			for _, j := range res.Jobs {
				ids = append(ids, j.ID)
			}
			if res.NextCursor == "" {
				return ids
			}
			// Jobs added meanwhile come after the cursor (newer ids).
			enqueue(t, s, t0, backend.NewJob{Queue: "late", Type: "late"})
			p.Cursor = res.NextCursor
			if n > 100 {
				t.Fatal("paging does not end")
			}
		}
	}
	for filter, params := range map[string]backend.ListParams{
		"queue=q1":                 {Queue: "q1", Limit: 3},
		"type=t1":                  {Type: "t1", Limit: 4},
		"queue=q0,state=completed": {Queue: "q0", State: backend.StateCompleted, Limit: 1},
		"state=completed":          {State: backend.StateCompleted, Limit: 3},
		"state=active":             {State: backend.StateActive, Limit: 1},
	} {
		got := page(params)
		if fmt.Sprint(got) != fmt.Sprint(want[filter]) {
			t.Fatalf("%s: paged %d ids %v\nwant %d %v", filter, len(got), got, len(want[filter]), want[filter])
		}
		params.Order = backend.NewestFirst
		got = page(params)
		rev := append([]string(nil), want[filter]...)
		for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
			rev[i], rev[j] = rev[j], rev[i]
		}
		if fmt.Sprint(got) != fmt.Sprint(rev) {
			t.Fatalf("%s newest first: %v\nwant %v", filter, got, rev)
		}
	}
	res, err := s.List(ctx, backend.ListParams{Queue: "q1", Limit: 2})
	if err != nil || res.NextCursor == "" {
		t.Fatal(err)
	}
	if _, err := s.List(ctx, backend.ListParams{Queue: "q2", Limit: 2, Cursor: res.NextCursor}); err == nil {
		t.Fatal("a cursor of another filter was accepted")
	}
	st, err := s.Stats(ctx, backend.StatsParams{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range st.Queues {
		for state, n := range q.Counts {
			all := page(backend.ListParams{Queue: q.Name, State: state, Limit: 1000})
			if int64(len(all)) != n {
				t.Fatalf("queue %s: Stats counts %d %s, List lists %d", q.Name, n, state, len(all))
			}
		}
	}
}
