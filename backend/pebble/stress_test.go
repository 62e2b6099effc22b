package pebble

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestStressIndexesMatchStorage runs every operation concurrently on a
// shared timeline, then checks that the in-memory indexes agree with the
// records: every job that is not final can be recovered and claimed, none
// twice, and the same holds after a reopen.
func TestStressIndexesMatchStorage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64 // milliseconds after t0
	now := func() time.Time { return t0.Add(time.Duration(clock.Add(1)) * time.Millisecond) }
	queues := []string{"a", "b", "c"}

	var mu sync.Mutex
	ids := map[string]bool{}
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for w := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range 150 {
				var err error
				switch n := now(); rng.IntN(6) {
				case 0, 1:
					jobs := make([]backend.NewJob, 1+rng.IntN(5))
					for i := range jobs {
						jobs[i] = backend.NewJob{
							Type: "t", Queue: queues[rng.IntN(3)], Priority: rng.IntN(3),
							MaxAttempts: 1 + rng.IntN(3), Payload: []byte("x"),
						}
						switch rng.IntN(5) {
						case 0:
							jobs[i].RunAt = n.Add(time.Duration(rng.IntN(50)) * time.Millisecond)
						case 1:
							jobs[i].Deadline = n.Add(time.Duration(1+rng.IntN(200)) * time.Millisecond)
						case 2:
							jobs[i].UniqueKey = string(rune('a' + rng.IntN(5)))
							jobs[i].UniqueFor = time.Duration(rng.IntN(2)) * 20 * time.Millisecond
						case 3:
							jobs[i].Retention = backend.RetainNone
						}
					}
					var res backend.EnqueueResult
					res, err = s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: n})
					mu.Lock()
					for _, j := range res.Jobs {
						ids[j.ID] = true
					}
					mu.Unlock()
				case 2:
					var res backend.ClaimResult
					mode := backend.ClaimStrict
					if rng.IntN(2) == 0 {
						mode = backend.ClaimWeighted
					}
					res, err = s.Claim(ctx, backend.ClaimParams{Queues: queues, Mode: mode, Max: 1 + rng.IntN(4), Lease: 30 * time.Millisecond, Now: n})
					if err != nil {
						break
					}
					for _, j := range res.Jobs {
						l := leaseOf(j)
						at := now()
						switch rng.IntN(5) {
						case 0:
							_, err = s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: l}}, Now: at})
						case 1:
							_, err = s.Fail(ctx, backend.FailParams{Items: []backend.FailItem{{Lease: l, Message: "m", RetryAt: at.Add(time.Duration(rng.IntN(20)) * time.Millisecond)}}, Now: at})
						case 2:
							_, err = s.Release(ctx, backend.ReleaseParams{Leases: []backend.Lease{l}, Now: at})
						case 3:
							_, err = s.Heartbeat(ctx, backend.HeartbeatParams{Leases: []backend.Lease{l}, Extend: time.Second, Now: at})
						} // 4: leave it to expire
						if err != nil {
							break
						}
					}
				case 3:
					_, err = s.Promote(ctx, backend.MaintenanceParams{Now: n, Limit: 5})
					if err == nil {
						_, err = s.RecoverLeases(ctx, backend.MaintenanceParams{Now: n, Limit: 5})
					}
				case 4:
					_, err = s.ApplyRetention(ctx, backend.MaintenanceParams{Now: n.Add(48 * time.Hour), Limit: 5})
				case 5:
					mu.Lock()
					var victim string
					for id := range ids {
						victim = id
						break
					}
					mu.Unlock()
					if victim != "" {
						err = s.Delete(ctx, backend.DeleteParams{ID: victim, Now: n})
						if errors.Is(err, backend.ErrNotFound) || errors.Is(err, backend.ErrJobActive) {
							err = nil
						}
					}
				}
				if err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}

	// drain recovers every lease, promotes every timer and claims every job
	// far in the future; it returns the claimed ids and checks that every
	// job that is not final was among them.
	far := t0.Add(time.Hour)
	drain := func(s *Store, at time.Time) map[string]bool {
		t.Helper()
		for _, step := range []func(context.Context, backend.MaintenanceParams) (backend.MaintenanceResult, error){s.RecoverLeases, s.Promote} {
			for {
				res, err := step(ctx, backend.MaintenanceParams{Now: at})
				if err != nil {
					t.Fatal(err)
				}
				if res.Moved+res.Cancelled == 0 {
					break
				}
			}
		}
		got := map[string]bool{}
		for _, j := range claim(t, s, at, 1<<20, queues...) {
			if got[j.ID] {
				t.Fatalf("job %s claimed twice in one claim", j.ID)
			}
			got[j.ID] = true
		}
		for id := range ids {
			j, err := s.Get(ctx, backend.GetParams{ID: id})
			if errors.Is(err, backend.ErrNotFound) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if !j.State.Final() && !got[id] {
				t.Fatalf("job %s is %s but was not claimable", id, j.State)
			}
			if got[id] && j.State != backend.StateActive {
				t.Fatalf("claimed job %s is %s", id, j.State)
			}
		}
		return got
	}
	first := drain(s, far)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, Options{})
	// Past the leases given by drain, the same jobs come back.
	second := drain(s, far.Add(time.Hour))
	for id := range first {
		if !second[id] && !s.finalOrGone(t, id) {
			t.Fatalf("job %s claimed before the reopen was not claimable after it", id)
		}
	}
	t.Logf("%d jobs enqueued; %d claimable after the run, %d after the reopen", len(ids), len(first), len(second))
}

// finalOrGone reports whether a job is final or was deleted (RetainNone).
func (s *Store) finalOrGone(t *testing.T, id string) bool {
	t.Helper()
	j, err := s.Get(context.Background(), backend.GetParams{ID: id})
	if errors.Is(err, backend.ErrNotFound) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return j.State.Final()
}
