package redis

import (
	"slices"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestClaimErrorsByPosition: a claim whose jobs are fresh and retried,
// the retried ones after the fresh, hands each job its own attempt
// errors (claim.lua replies with the errors of those that have any, by
// position) and none to the others.
func TestClaimErrorsByPosition(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	enqueue := func(at time.Time, priority int, types ...string) {
		t.Helper()
		jobs := make([]backend.NewJob, len(types))
		for i, ty := range types {
			jobs[i] = backend.NewJob{Type: ty, Queue: "q", Priority: priority}
		}
		if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: at, Jobs: jobs}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(at time.Time) []*backend.Job {
		t.Helper()
		res, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute, WorkerID: "w", Now: at})
		if err != nil {
			t.Fatal(err)
		}
		return res.Jobs
	}
	enqueue(now, 0, "a", "b", "c", "d")
	var fails []backend.FailItem
	var dones []backend.CompleteItem
	for _, j := range claim(now) {
		l := backend.Lease{JobID: j.ID, Token: j.LeaseToken}
		if j.Type == "b" || j.Type == "d" {
			fails = append(fails, backend.FailItem{Lease: l, Message: "failed " + j.Type, RetryAt: now})
		} else {
			dones = append(dones, backend.CompleteItem{Lease: l})
		}
	}
	if _, err := s.Fail(ctx, backend.FailParams{Items: fails, Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(ctx, backend.CompleteParams{Items: dones, Now: now}); err != nil {
		t.Fatal(err)
	}
	// e and f come first (a higher priority), then the retried b and d.
	enqueue(now, 5, "e", "f")
	got := claim(now.Add(time.Second))
	var order string
	for _, j := range got {
		order += j.Type
		want := 0
		if j.Type == "b" || j.Type == "d" {
			want = 1
		}
		if len(j.Errors) != want || want == 1 && j.Errors[0].Message != "failed "+j.Type {
			t.Errorf("job %s: errors %+v; want %d", j.Type, j.Errors, want)
		}
	}
	if order != "efbd" && order != "fedb" && order != "efdb" && order != "febd" {
		t.Fatalf("claimed %q; want e and f, then b and d", order)
	}
}

// TestPlainForms: a drain's claims and completions run one script each,
// "claim plain" and "complete plain" (the claim and complete scripts
// with fewer keys); a claim of a queue with a job due to promote, a
// completion of a job with a deadline and one in a queue with a
// retention override for completed jobs run the full script after (two
// scripts), and the override's queue goes to the full script at once
// from then on. Every job ends as the full scripts would end it.
func TestPlainForms(t *testing.T) {
	t.Parallel()
	ps := startServer(t, "--appendonly", "no")
	ctx := t.Context()
	s := openPrivate(t, ps)
	if !slices.Equal(s.scripts.claimPlain.keys, s.scripts.claimLean.keys) {
		t.Fatalf("claim plain takes keys %v, claim lean %v: keysOf gives both the latter", s.scripts.claimPlain.keys, s.scripts.claimLean.keys)
	}
	now := time.Now()
	week := 7 * 24 * time.Hour
	if _, err := s.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: "kept", Retention: &backend.QueueRetention{Completed: backend.Retention(week)}, Now: now}); err != nil {
		t.Fatal(err)
	}
	scripts := func(t *testing.T, what string, want int64, run func()) {
		t.Helper()
		if _, err := ps.cli("CONFIG", "RESETSTAT"); err != nil {
			t.Fatal(err)
		}
		run()
		if got := commandCalls(t, ps)["fcall"]; got != want {
			t.Errorf("%s ran %d scripts; want %d", what, got, want)
		}
	}
	claim := func(q string) []backend.CompleteItem {
		t.Helper()
		res, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{q}, Max: 10, Lease: time.Minute, WorkerID: "w", Now: now})
		if err != nil {
			t.Fatal(err)
		}
		items := completeItems(res.Jobs)
		return items
	}
	complete := func(items []backend.CompleteItem) {
		t.Helper()
		res, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range res.Errors {
			if e != nil {
				t.Fatalf("item %d: %v", i, e)
			}
		}
	}
	enqueue := func(jobs ...backend.NewJob) {
		t.Helper()
		if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now.Add(-time.Hour), Jobs: jobs}); err != nil {
			t.Fatal(err)
		}
	}
	enqueue(backend.NewJob{Type: "t", Queue: "q"}, backend.NewJob{Type: "t", Queue: "q"})
	var items []backend.CompleteItem
	scripts(t, "a claim of pending jobs", 1, func() { items = claim("q") })
	scripts(t, "their completion", 1, func() { complete(items) })
	enqueue(backend.NewJob{Type: "t", Queue: "q", RunAt: now.Add(-time.Minute)}, backend.NewJob{Type: "t", Queue: "q", Deadline: now.Add(time.Hour)})
	scripts(t, "a claim with a job due to promote", 2, func() { items = claim("q") })
	if len(items) != 2 {
		t.Fatalf("claimed %d jobs; want the due one and the one with a deadline", len(items))
	}
	scripts(t, "a completion with a job with a deadline", 2, func() { complete(items) })
	enqueue(backend.NewJob{Type: "t", Queue: "kept"}, backend.NewJob{Type: "t", Queue: "kept"})
	scripts(t, "a claim in a queue with settings", 1, func() { items = claim("kept") })
	scripts(t, "a completion in a queue with an override", 2, func() { complete(items[:1]) })
	scripts(t, "the next completion there", 1, func() { complete(items[1:]) })
	for _, it := range items {
		j, err := s.Get(ctx, backend.GetParams{ID: it.Lease.JobID})
		if err != nil || j.State != backend.StateCompleted || !j.ExpiresAt.Equal(now.Truncate(time.Millisecond).Add(week)) {
			t.Fatalf("job in kept: %+v, %v; want completed, kept a week", j, err)
		}
	}
}
