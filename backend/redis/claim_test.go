package redis

import (
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
