package redis

import (
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestLeaseAnchor checks the member that keeps a leases set a skiplist
// (leaseAnchor in keys.go): the set is one from the first claim on, and
// neither Stats nor List counts the anchor as an active job.
func TestLeaseAnchor(t *testing.T) {
	t.Parallel()
	if len(leaseAnchor) <= 64 {
		t.Fatalf("leaseAnchor has %d bytes; it must exceed zset-max-listpack-value (64)", len(leaseAnchor))
	}
	if _, ok := queueNumOf(leaseAnchor); ok {
		t.Fatal("leaseAnchor reads as a job id")
	}
	s := openTest(t, "")
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "t", Queue: "q"}, {Type: "t", Queue: "q"}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute, Now: now})
	if err != nil || len(c.Jobs) != 1 {
		t.Fatalf("claim = %v, %v; want one job", c.Jobs, err)
	}
	num, _ := queueNumOf(res.Jobs[0].ID)
	key := s.keys.queue(num).leases()
	enc, err := s.client.Do(ctx, s.client.B().ObjectEncoding().Key(key).Build()).ToString()
	if err != nil || enc != "skiplist" {
		t.Fatalf("OBJECT ENCODING %s = %q, %v; want skiplist", key, enc, err)
	}
	active := func(want int) {
		t.Helper()
		st, err := s.Stats(ctx, backend.StatsParams{Now: now})
		if err != nil || len(st.Queues) != 1 || st.Queues[0].Counts[backend.StateActive] != int64(want) {
			t.Fatalf("Stats = %+v, %v; want %d active", st.Queues, err, want)
		}
		page, err := s.List(ctx, backend.ListParams{Queue: "q", State: backend.StateActive})
		if err != nil || len(page.Jobs) != want {
			t.Fatalf("List of active jobs = %v, %v; want %d", ids(page.Jobs), err, want)
		}
	}
	active(1)
	b, err := s.Complete(ctx, backend.CompleteParams{Now: now, Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: c.Jobs[0].ID, Token: c.Jobs[0].LeaseToken}}}})
	if err != nil || b.Errors[0] != nil {
		t.Fatalf("complete = %v, %v", b.Errors, err)
	}
	active(0)
	// No recovery takes the anchor for an expired lease.
	r, err := s.RecoverLeases(ctx, backend.MaintenanceParams{Now: backend.MaxTime().Add(-time.Second)})
	if err != nil || r.Moved != 0 || r.Failed != 0 {
		t.Fatalf("RecoverLeases = %+v, %v; want nothing recovered", r, err)
	}
}
