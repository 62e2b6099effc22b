package redis

import (
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestRetryLeavesUniqueForKeys checks the retry script's reading of a
// job's body (hasUniqueFor in lua/common.lua): Retry takes a unique key again
// only for a job without UniqueFor, also when the body's strings are long
// enough to need multi-byte lengths.
func TestRetryLeavesUniqueForKeys(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", 300)
	failed := func(uniqueFor time.Duration, key string) string {
		t.Helper()
		res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{
			Type: "t." + long[:200], Queue: "q", Payload: []byte(long), Title: long, Timeout: 90 * time.Second,
			UniqueKey: key, UniqueFor: uniqueFor, MaxAttempts: 1, Retention: backend.RetainForever,
		}}})
		if err != nil {
			t.Fatal(err)
		}
		id := res.Jobs[0].ID
		c, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute, Now: now})
		if err != nil || len(c.Jobs) != 1 || c.Jobs[0].ID != id {
			t.Fatalf("claim = %v, %v; want job %s", c.Jobs, err, id)
		}
		b, err := s.Fail(ctx, backend.FailParams{Now: now, Items: []backend.FailItem{{Lease: backend.Lease{JobID: id, Token: c.Jobs[0].LeaseToken}, Message: "boom"}}})
		if err != nil || b.Errors[0] != nil {
			t.Fatalf("fail = %v, %v", b.Errors, err)
		}
		return id
	}
	enqueue := func(key string) backend.EnqueuedJob {
		t.Helper()
		res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "t", Queue: "q", UniqueKey: key, RunAt: now.Add(time.Hour)}}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Jobs[0]
	}

	period := failed(time.Hour, "period")
	untilFinal := failed(0, "final")
	now = now.Add(2 * time.Hour)
	if _, err := s.ApplyRetention(ctx, backend.MaintenanceParams{Now: now}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{period, untilFinal} {
		if j, err := s.Retry(ctx, backend.RetryParams{ID: id, Now: now}); err != nil || j.State != backend.StatePending {
			t.Fatalf("Retry(%s) = %v, %v; want the job, pending", id, j, err)
		}
	}
	if got := enqueue("period"); got.Duplicate {
		t.Fatalf("a key held for a period that has ended is held again by %s after Retry; want it free", got.ID)
	}
	if got := enqueue("final"); !got.Duplicate || got.ID != untilFinal {
		t.Fatalf("enqueue with the key of a retried job (no UniqueFor) = %+v; want a duplicate of %s", got, untilFinal)
	}
}

// TestListPendingAcrossPriorities lists pending jobs, which have no
// id-ordered set, in id order whatever their priorities, and counts them
// as Stats does.
func TestListPendingAcrossPriorities(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var want []string
	for i := range 12 {
		res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now.Add(-time.Duration(i) * time.Second), Jobs: []backend.NewJob{{Type: "t", Queue: "q", Priority: (i % 3) * 10}}})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, res.Jobs[0].ID)
	}
	var got []string
	p := backend.ListParams{Queue: "q", State: backend.StatePending, Limit: 5}
	for {
		page, err := s.List(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Jobs {
			got = append(got, j.ID)
		}
		if page.NextCursor == "" {
			break
		}
		p.Cursor = page.NextCursor
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("pending jobs listed %v; want %v", got, want)
	}
	st, err := s.Stats(ctx, backend.StatsParams{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Queues) != 1 || st.Queues[0].Counts[backend.StatePending] != 12 {
		t.Fatalf("Stats = %+v; want queue q with 12 pending jobs", st.Queues)
	}
	// The last job has the earliest RunAt, whatever its priority.
	if at := st.Queues[0].OldestPending; !at.Equal(now.Add(-11 * time.Second)) {
		t.Fatalf("OldestPending = %s; want %s", at, now.Add(-11*time.Second))
	}
}

// TestRecoverKeepsFutureRunAtPending recovers the lease of a pending job
// that a claimer whose clock is behind took before its RunAt: the job goes
// back to pending (claimable and counted as such), not to the waiting set.
func TestRecoverKeepsFutureRunAtPending(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	producer := time.Date(2030, 1, 1, 1, 0, 0, 0, time.UTC)
	claimer := producer.Add(-time.Hour)
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: producer, Jobs: []backend.NewJob{{Type: "t", Queue: "q"}}})
	if err != nil || res.Jobs[0].State != backend.StatePending {
		t.Fatalf("enqueue = %+v, %v; want a pending job", res, err)
	}
	c, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute, Now: claimer})
	if err != nil || len(c.Jobs) != 1 {
		t.Fatalf("claim by a clock an hour behind = %v, %v; want the pending job", c.Jobs, err)
	}
	later := claimer.Add(time.Minute)
	if m, err := s.RecoverLeases(ctx, backend.MaintenanceParams{Now: later}); err != nil || m.Moved != 1 {
		t.Fatalf("RecoverLeases = %+v, %v; want 1 recovered", m, err)
	}
	st, err := s.Stats(ctx, backend.StatsParams{Now: later})
	if err != nil || len(st.Queues) != 1 || st.Queues[0].Counts[backend.StatePending] != 1 {
		t.Fatalf("Stats after recovery = %+v, %v; want 1 pending job", st.Queues, err)
	}
	again, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute, Now: later})
	if err != nil || len(again.Jobs) != 1 || again.Jobs[0].ID != res.Jobs[0].ID {
		t.Fatalf("claim after recovery = %v, %v; want the recovered job", again.Jobs, err)
	}
}
