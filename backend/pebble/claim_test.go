package pebble

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// A scheduled job is claimable from its run-at on, even before a Promote
// step has run: Claim moves its queues' due timers first.
func TestClaimPromotesDueJobs(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	low := enqueue(t, s, t0, backend.NewJob{Title: "low"})[0].ID
	high := enqueue(t, s, t0, backend.NewJob{Title: "high", Priority: 9, RunAt: t0.Add(time.Minute)})[0].ID
	if got := claim(t, s, t0.Add(time.Minute-time.Millisecond), 1); len(got) != 1 || got[0].ID != low {
		t.Fatalf("claim before run-at = %v; want only the pending job", got)
	}
	got := claim(t, s, t0.Add(time.Minute), 1)
	if len(got) != 1 || got[0].ID != high {
		t.Fatalf("claim at run-at = %v; want the scheduled job", got)
	}
	res, err := s.Promote(context.Background(), backend.MaintenanceParams{Now: t0.Add(time.Hour)})
	if err != nil || res != (backend.MaintenanceResult{}) {
		t.Fatalf("Promote after the claim = %+v, %v; want nothing left to do", res, err)
	}
}

// A claimer whose clock is behind the enqueuer's still takes a pending job
// whose RunAt is ahead of its Now, in the usual order.
func TestClaimClockBehind(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	ahead := enqueue(t, s, t0.Add(time.Second), backend.NewJob{Priority: 5})[0].ID
	behind := enqueue(t, s, t0, backend.NewJob{})[0].ID
	aheadLow := enqueue(t, s, t0.Add(time.Second), backend.NewJob{})[0].ID
	got := claim(t, s, t0, 10)
	var ids []string
	for _, j := range got {
		ids = append(ids, j.ID)
	}
	if want := []string{ahead, behind, aheadLow}; !slices.Equal(ids, want) {
		t.Fatalf("claim at t0 = %v; want %v (priority, then run-at)", ids, want)
	}
}

// Deleted and deadline-cancelled pending jobs leave stale heap entries that
// Claim skips.
func TestClaimSkipsStaleEntries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, t.TempDir(), Options{})
	res := enqueue(t, s, t0,
		backend.NewJob{Title: "deleted"},
		backend.NewJob{Title: "expired", Deadline: t0.Add(time.Second)},
		backend.NewJob{Title: "kept"},
	)
	if err := s.Delete(ctx, backend.DeleteParams{ID: res[0].ID, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Promote(ctx, backend.MaintenanceParams{Now: t0.Add(time.Second)}); err != nil || r.Cancelled != 1 {
		t.Fatalf("Promote = %+v, %v; want Cancelled 1", r, err)
	}
	if got := claim(t, s, t0.Add(time.Second), 10); len(got) != 1 || got[0].Title != "kept" {
		t.Fatalf("claim = %v; want only the kept job", got)
	}
}

func TestEnqueueRefusesTimesOutOfRange(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	_, err := s.Enqueue(context.Background(), backend.EnqueueParams{
		Jobs: []backend.NewJob{{Type: "t"}, {Type: "t", Deadline: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		Now:  t0,
	})
	var ve *backend.ValidationError
	if !errors.As(err, &ve) || ve.Index != 1 || ve.Field != "deadline" {
		t.Fatalf("Enqueue with a deadline in the year 3000 = %v; want a ValidationError for item 1's deadline", err)
	}
	if got := claim(t, s, t0, 10); len(got) != 0 {
		t.Fatalf("a refused batch wrote %d jobs", len(got))
	}
}

// TestClaimsKeepBlocksCached drains jobs whose records and payloads are
// in tables while Pebble holds two full memtables, which it counts
// against the block cache, and checks that consecutive claims find the
// blocks the claims before them read in the cache instead of reading
// them from the files again.
func TestClaimsKeepBlocksCached(t *testing.T) {
	t.Parallel()
	const n, batch = 6000, 50
	// Cache and memtables are scaled down together, as 64 and 32 MiB.
	s := openStore(t, t.TempDir(), Options{CacheSize: 2 << 20, MemTableSize: 1 << 20})
	ctx := context.Background()
	payload := bytes.Repeat([]byte("p"), 100)
	jobs := make([]backend.NewJob, 500)
	for done := 0; done < n; done += len(jobs) {
		for i := range jobs {
			jobs[i] = backend.NewJob{Type: "t", Payload: payload}
		}
		if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	misses0 := s.db.Metrics().BlockCache.Misses
	if got := drainQueue(t, s, 1, batch, 0); got != n {
		t.Fatalf("drained %d of %d jobs", got, n)
	}
	// Reading each block once takes about 0.02 reads a job; a cache with
	// no room left reads the claims' index and data blocks again for every
	// claim, about 0.15 a job.
	if perJob := float64(s.db.Metrics().BlockCache.Misses-misses0) / n; perJob > 0.06 {
		t.Errorf("the drain read %.3f blocks a job from the files; want at most 0.06", perJob)
	}
}
