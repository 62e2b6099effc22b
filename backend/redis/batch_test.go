package redis

import (
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestLargeBatches claims, heartbeats and completes 3,000 jobs in one call
// each: the scripts read and write such batches in chunks, within Lua's
// limit on the values one call may take.
func TestLargeBatches(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 3000
	jobs := make([]backend.NewJob, n)
	for i := range jobs {
		jobs[i] = backend.NewJob{Type: "t", Queue: "big", Payload: []byte("p")}
	}
	if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"big"}, Max: n, Lease: time.Minute, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed.Jobs) != n {
		t.Fatalf("claimed %d jobs, want %d", len(claimed.Jobs), n)
	}
	leases := make([]backend.Lease, n)
	items := make([]backend.CompleteItem, n)
	for i, j := range claimed.Jobs {
		leases[i] = backend.Lease{JobID: j.ID, Token: j.LeaseToken}
		items[i] = backend.CompleteItem{Lease: leases[i], Result: []byte("r")}
	}
	later := now.Add(30 * time.Second)
	hb, err := s.Heartbeat(ctx, backend.HeartbeatParams{Leases: leases, Extend: time.Minute, Now: later})
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range hb.Leases {
		if st.Lost {
			t.Fatalf("heartbeat %d: lost", i)
		}
	}
	// Past the first lease's end, within the extended one.
	done, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: now.Add(80 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range done.Errors {
		if e != nil {
			t.Fatalf("complete %d: %v", i, e)
		}
	}
	for _, id := range []string{leases[0].JobID, leases[n/2].JobID, leases[n-1].JobID} {
		j, err := s.Get(ctx, backend.GetParams{ID: id})
		if err != nil || j.State != backend.StateCompleted || string(j.Result) != "r" {
			t.Fatalf("Get(%s) = %+v, %v; want completed with result r", id, j, err)
		}
	}
	if res, err := s.RecoverLeases(ctx, backend.MaintenanceParams{Now: now.Add(time.Hour)}); err != nil || res.Moved != 0 {
		t.Fatalf("RecoverLeases after completing everything = %+v, %v; want nothing to recover", res, err)
	}
}
