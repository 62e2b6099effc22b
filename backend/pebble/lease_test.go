package pebble

import (
	"context"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestLeaseExpiryBounded drains more jobs than the lease expiry heap may
// hold stale entries for, within one lease period (no lease expires, so
// RecoverLeases would drop none), and checks that the heap stays bounded
// by the live leases rather than growing with every claim and heartbeat.
func TestLeaseExpiryBounded(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	ctx := context.Background()
	const n = 3 * leaseExpirySlack
	jobs := make([]backend.NewJob, n)
	for i := range jobs {
		jobs[i] = backend.NewJob{Type: "t"}
	}
	enqueue(t, s, t0, jobs...)
	held := claim(t, s, t0, 10) // live leases, kept to the end
	for {
		got := claim(t, s, t0, 100)
		if len(got) == 0 {
			break
		}
		leases := make([]backend.Lease, len(got))
		items := make([]backend.CompleteItem, len(got))
		for i, j := range got {
			leases[i] = leaseOf(j)
			items[i] = backend.CompleteItem{Lease: leaseOf(j)}
		}
		if _, err := s.Heartbeat(ctx, backend.HeartbeatParams{Leases: leases, Extend: time.Minute, Now: t0}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	entries, live := s.idx.leaseExpiry.len(), len(s.idx.leases)
	s.mu.Unlock()
	if live != len(held) {
		t.Fatalf("%d leases; want %d", live, len(held))
	}
	if limit := 2*live + leaseExpirySlack; entries > limit {
		t.Fatalf("lease expiry heap holds %d entries for %d leases; want at most %d", entries, live, limit)
	}
	// The held leases still expire and are recovered.
	res, err := s.RecoverLeases(ctx, backend.MaintenanceParams{Now: t0.Add(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != len(held) {
		t.Fatalf("RecoverLeases moved %d; want %d", res.Moved, len(held))
	}
}
