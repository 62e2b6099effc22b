package pebble

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kyuhq/kyu/backend"
)

// acks records what the store acknowledged.
type acks struct {
	mu        sync.Mutex
	enqueued  map[string]bool
	claimed   map[string]int64 // id → token
	completed map[string]bool
}

func newAcks() *acks {
	return &acks{enqueued: map[string]bool{}, claimed: map[string]int64{}, completed: map[string]bool{}}
}

func (a *acks) snapshot() *acks {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := newAcks()
	for k, v := range a.enqueued {
		c.enqueued[k] = v
	}
	for k, v := range a.claimed {
		c.claimed[k] = v
	}
	for k, v := range a.completed {
		c.completed[k] = v
	}
	return c
}

// TestPowerLoss runs writers against a crashable in-memory file system,
// takes a crash clone (which keeps only what was synced) while they run,
// and checks that the clone holds every enqueue, claim and completion
// acknowledged before the clone was taken.
func TestPowerLoss(t *testing.T) {
	t.Parallel()
	for _, unsynced := range []int{0, 50} {
		fs := vfs.NewCrashableMem()
		s := openStore(t, "/kyu", Options{FS: fs})
		a := newAcks()
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		fail := func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if firstErr == nil && !errors.Is(err, context.Canceled) {
				firstErr = err
			}
		}
		var progress sync.WaitGroup
		progress.Add(4)
		for w := range 4 {
			wg.Go(func() {
				reached := false
				defer func() {
					if !reached {
						progress.Done() // failed early: do not hold up the crash
					}
				}()
				now := t0
				for n := 0; ctx.Err() == nil; n++ {
					now = now.Add(time.Millisecond)
					jobs := make([]backend.NewJob, 1+w)
					for i := range jobs {
						jobs[i] = backend.NewJob{Type: "t", Payload: []byte("payload"), Retention: backend.RetainForever}
					}
					res, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: now})
					if err != nil {
						fail(err)
						return
					}
					a.mu.Lock()
					for _, j := range res.Jobs {
						a.enqueued[j.ID] = true
					}
					a.mu.Unlock()
					cl, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{backend.DefaultQueue}, Max: 2, Lease: time.Hour, Now: now})
					if err != nil {
						fail(err)
						return
					}
					a.mu.Lock()
					for _, j := range cl.Jobs {
						a.claimed[j.ID] = j.LeaseToken
					}
					a.mu.Unlock()
					var items []backend.CompleteItem
					for _, j := range cl.Jobs {
						if rand.IntN(2) == 0 {
							items = append(items, backend.CompleteItem{Lease: leaseOf(j), Result: []byte("r")})
						}
					}
					if len(items) > 0 {
						r, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: now})
						if err != nil {
							fail(err)
							return
						}
						a.mu.Lock()
						for i, e := range r.Errors {
							if e == nil {
								a.completed[items[i].Lease.JobID] = true
							}
						}
						a.mu.Unlock()
					}
					if n == 20 {
						reached = true
						progress.Done()
					}
				}
			})
		}
		progress.Wait() // every writer is well under way
		before := a.snapshot()
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced, RNG: rand.New(rand.NewPCG(1, uint64(unsynced)))})
		stop()
		wg.Wait()
		if firstErr != nil {
			t.Fatal(firstErr)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		r := openStore(t, "/kyu", Options{FS: crashed})
		for id := range before.enqueued {
			j, err := r.Get(context.Background(), backend.GetParams{ID: id})
			if err != nil {
				t.Fatalf("unsynced %d%%: acknowledged enqueue %s lost: %v", unsynced, id, err)
			}
			if string(j.Payload) != "payload" {
				t.Fatalf("job %s payload %q", id, j.Payload)
			}
			if tok, ok := before.claimed[id]; ok && (j.LeaseToken < tok || j.State == backend.StatePending) {
				t.Fatalf("acknowledged claim of %s (token %d) lost: state %s token %d", id, tok, j.State, j.LeaseToken)
			}
			if before.completed[id] && (j.State != backend.StateCompleted || string(j.Result) != "r") {
				t.Fatalf("acknowledged completion of %s lost: state %s", id, j.State)
			}
		}
		t.Logf("unsynced %d%%: %d enqueues, %d claims, %d completions acknowledged before the crash, all present",
			unsynced, len(before.enqueued), len(before.claimed), len(before.completed))
	}
}
