package redis

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestCompleteMixedBatch completes, in one call, jobs that take the
// complete script's short way and jobs that take finish (a deadline, a
// unique key, a requested cancel, a retention of their own, a lease named
// twice), in a queue with the default retention and in one with an
// override: each ends as finish would end it, and the completed jobs'
// in set, final set and leases set hold what they should. It runs with
// a job's result in the call (complete.lua) and without (complete plain,
// which leaves both queues to complete.lua: mix for its jobs, kept for
// its override, which the store then remembers).
func TestCompleteMixedBatch(t *testing.T) {
	t.Parallel()
	for _, results := range []bool{true, false} {
		t.Run(fmt.Sprintf("results=%v", results), func(t *testing.T) {
			t.Parallel()
			completeMixedBatch(t, results)
		})
	}
}

func completeMixedBatch(t *testing.T, results bool) {
	s := openTest(t, "")
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	week := 7 * 24 * time.Hour
	if _, err := s.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: "kept", Retention: &backend.QueueRetention{Completed: backend.Retention(week)}, Now: now}); err != nil {
		t.Fatal(err)
	}
	jobs := []backend.NewJob{
		{Type: "plain", Queue: "mix"},
		{Type: "result", Queue: "mix"},
		{Type: "deadline", Queue: "mix", Deadline: now.Add(time.Hour)},
		{Type: "unique", Queue: "mix", UniqueKey: "u"},
		{Type: "cancel", Queue: "mix"},
		{Type: "none", Queue: "mix", Retention: backend.RetainNone},
		{Type: "forever", Queue: "mix", Retention: backend.RetainForever},
		{Type: "plain", Queue: "mix"},
		{Type: "plain", Queue: "kept"},
	}
	if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	byType := map[string][]backend.Lease{}
	for _, q := range []string{"mix", "kept"} {
		got, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{q}, Max: 20, Lease: time.Minute, WorkerID: "w", Now: now})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range got.Jobs {
			byType[j.Type] = append(byType[j.Type], backend.Lease{JobID: j.ID, Token: j.LeaseToken})
		}
	}
	if len(byType["plain"]) != 3 {
		t.Fatalf("claimed %v, want every job", byType)
	}
	cancel := byType["cancel"][0]
	if _, err := s.Cancel(ctx, backend.CancelParams{ID: cancel.JobID, Now: now}); err != nil {
		t.Fatal(err)
	}
	// Claimed queue by queue: the first two are of mix.
	plain, twice, kept := byType["plain"][0], byType["plain"][1], byType["plain"][2]
	var result []byte
	if results {
		result = []byte("r")
	}
	items := []backend.CompleteItem{
		{Lease: plain},
		{Lease: byType["result"][0], Result: result},
		{Lease: byType["deadline"][0]},
		{Lease: byType["unique"][0]},
		{Lease: cancel},
		{Lease: byType["none"][0]},
		{Lease: byType["forever"][0]},
		{Lease: twice},
		{Lease: twice},
		{Lease: kept},
	}
	end := now.Add(time.Second)
	res, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: end})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range res.Errors {
		if want := i == 8; (e != nil) != want || want && !errors.Is(e, backend.ErrLeaseLost) {
			t.Fatalf("item %d: %v; want lease lost only for the lease named twice", i, e)
		}
	}
	day := end.Add(24 * time.Hour)
	want := []struct {
		lease   backend.Lease
		state   backend.State
		expires time.Time
	}{
		{plain, backend.StateCompleted, day},
		{byType["result"][0], backend.StateCompleted, day},
		{byType["deadline"][0], backend.StateCompleted, day},
		{byType["unique"][0], backend.StateCompleted, day},
		{cancel, backend.StateCancelled, end.Add(week)},
		{byType["forever"][0], backend.StateCompleted, time.Time{}},
		{twice, backend.StateCompleted, day},
		{kept, backend.StateCompleted, end.Add(week)},
	}
	for _, w := range want {
		j, err := s.Get(ctx, backend.GetParams{ID: w.lease.JobID})
		if err != nil {
			t.Fatal(err)
		}
		if j.State != w.state || !j.ExpiresAt.Equal(w.expires) || !j.FinishedAt.Equal(end) || j.WorkerID != "" || !j.LeaseExpiresAt.IsZero() || j.Attempt != 1 {
			t.Fatalf("%s (%s): state %s, expires %v, finished %v, worker %q, lease %v, attempt %d; want %s, %v, %v, no worker or lease, 1",
				j.Type, j.ID, j.State, j.ExpiresAt, j.FinishedAt, j.WorkerID, j.LeaseExpiresAt, j.Attempt, w.state, w.expires, end)
		}
	}
	if _, err := s.Get(ctx, backend.GetParams{ID: byType["none"][0].JobID}); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Get of a completed job without retention = %v; want not found", err)
	}
	if j, err := s.Get(ctx, backend.GetParams{ID: byType["result"][0].JobID}); err != nil || string(j.Result) != string(result) {
		t.Fatalf("Get of the job with a result = %v; want its result %q", err, result)
	}
	for q, want := range map[string]bool{"mix": false, "kept": !results} {
		num, _, err := s.queues.number(ctx, q, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, full := s.fullComplete.Load(num); full != want {
			t.Errorf("queue %s left to complete.lua for good: %v, want %v", q, full, want)
		}
	}
	var completed []string
	for _, q := range []string{"mix", "kept"} {
		l, err := s.List(ctx, backend.ListParams{Queue: q, State: backend.StateCompleted, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range l.Jobs {
			completed = append(completed, j.ID)
		}
	}
	wantCompleted := []string{plain.JobID, byType["result"][0].JobID, byType["deadline"][0].JobID, byType["unique"][0].JobID, byType["forever"][0].JobID, twice.JobID, kept.JobID}
	slices.Sort(completed)
	slices.Sort(wantCompleted)
	if !slices.Equal(completed, wantCompleted) {
		t.Fatalf("completed jobs listed %v, want %v", completed, wantCompleted)
	}
	// The unique key was held until the job was final: it is free now.
	again, err := s.Enqueue(ctx, backend.EnqueueParams{Now: end, Jobs: []backend.NewJob{{Type: "unique", Queue: "mix", UniqueKey: "u"}}})
	if err != nil || len(again.Jobs) != 1 || again.Jobs[0].Duplicate {
		t.Fatalf("Enqueue with the freed unique key = %+v, %v; want a new job", again, err)
	}
	if rec, err := s.RecoverLeases(ctx, backend.MaintenanceParams{Now: now.Add(time.Hour)}); err != nil || rec.Moved != 0 {
		t.Fatalf("RecoverLeases = %+v, %v; want no lease left", rec, err)
	}
	// Retention deletes what the final sets say, when they say it.
	if _, err := s.ApplyRetention(ctx, backend.MaintenanceParams{Now: day}); err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		_, err := s.Get(ctx, backend.GetParams{ID: w.lease.JobID})
		if gone := !w.expires.IsZero() && !w.expires.After(day); gone != errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("after retention at %v, Get(%s) = %v; want gone %v", day, w.lease.JobID, err, gone)
		}
	}
}
