package backendtest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// wantDuplicate enqueues j and checks that it is refused as a duplicate of holder.
func (f *fixture) wantDuplicate(j backend.NewJob, holder string, why string) backend.EnqueuedJob {
	f.t.Helper()
	r := f.enqueue(j)[0]
	if !r.Duplicate || r.ID != holder {
		f.t.Fatalf("Enqueue with unique key %q at %s = %+v; want Duplicate of %s: %s", j.UniqueKey, stamp(f.now), r, holder, why)
	}
	return r
}

// wantFresh enqueues j and checks that it is written as a new job.
func (f *fixture) wantFresh(j backend.NewJob, why string) string {
	f.t.Helper()
	r := f.enqueue(j)[0]
	if r.Duplicate {
		f.t.Fatalf("Enqueue with unique key %q at %s was refused as a duplicate of %s (state %q); want a new job: %s",
			j.UniqueKey, stamp(f.now), r.ID, r.State, why)
	}
	return r.ID
}

func testUnique(t *testing.T, factory Factory) {
	t.Run("Duplicate", func(t *testing.T) {
		f := start(t, factory)
		k := backend.NewJob{UniqueKey: "k"}
		first := f.wantFresh(k, "the key is free")
		r := f.wantDuplicate(k, first, "the first job is pending")
		if r.State != backend.StatePending {
			t.Errorf("Duplicate reports state %q; want the holder's state, pending", r.State)
		}
		f.claimID(first, "the only job")
		f.claimNothing("the duplicate wrote nothing")
		r = f.wantDuplicate(k, first, "the first job is active")
		if r.State != backend.StateActive {
			t.Errorf("Duplicate reports state %q; want the holder's state, active", r.State)
		}
		f.wantFresh(backend.NewJob{UniqueKey: "other"}, "a different key is free")
		f.wantFresh(backend.NewJob{}, "a job without a key is never a duplicate")
	})

	t.Run("ScopedToQueue", func(t *testing.T) {
		f := start(t, factory)
		first := f.wantFresh(backend.NewJob{UniqueKey: "k"}, "the key is free")
		f.wantFresh(backend.NewJob{UniqueKey: "k", Queue: uniqueQueue(t, "-other")}, "the key's scope is its queue")
		f.wantDuplicate(backend.NewJob{UniqueKey: "k", Type: "another.type"}, first, "the key's scope is the queue, not the type")
	})

	t.Run("InBatch", func(t *testing.T) {
		f := start(t, factory)
		held := f.wantFresh(backend.NewJob{UniqueKey: "held"}, "the key is free")
		res := f.enqueue(
			backend.NewJob{UniqueKey: "k", Title: "first"},
			backend.NewJob{UniqueKey: "k", Title: "second"},
			backend.NewJob{Title: "plain"},
			backend.NewJob{UniqueKey: "held"},
		)
		if res[0].Duplicate || res[2].Duplicate {
			t.Fatalf("batch results = %+v; items 0 and 2 are new", res)
		}
		if !res[1].Duplicate || res[1].ID != res[0].ID || res[1].State != backend.StatePending {
			t.Fatalf("second item with the first item's key = %+v; want Duplicate of %s (pending)", res[1], res[0].ID)
		}
		if !res[3].Duplicate || res[3].ID != held {
			t.Fatalf("item with a key held before the batch = %+v; want Duplicate of %s", res[3], held)
		}
		if got := f.claim(10); len(got) != 3 {
			t.Fatalf("claimable after the batch: %d jobs; want 3 (the held job and the two new ones)", len(got))
		}
	})

	t.Run("FreedWhenFinal", func(t *testing.T) {
		f := start(t, factory)
		k := backend.NewJob{UniqueKey: "k", MaxAttempts: 2}

		first := f.wantFresh(k, "the key is free")
		j := f.claimID(first, "the only job")
		f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "again", RetryAt: f.now.Add(time.Hour)}))
		f.wantDuplicate(k, first, "a job in retry is not final")
		f.now = f.now.Add(time.Hour)
		f.promote()
		j = f.claimID(first, "the retry is due")
		f.mustOK("Complete", f.complete(lease(j), nil))
		second := f.wantFresh(k, "the holder completed")

		j = f.claimID(second, "the only pending job")
		f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "no", Final: true}))
		third := f.wantFresh(k, "the holder failed")

		j = f.claimID(third, "the only pending job")
		f.now = j.LeaseExpiresAt
		f.recoverLeases() // back to pending: attempt 1 of 2 used
		f.wantDuplicate(k, third, "a recovered job is pending again")
		j = f.claimID(third, "the recovered job")
		f.now = j.LeaseExpiresAt
		f.recoverLeases() // attempts used up: failed
		fourth := f.wantFresh(k, "the holder failed by lease expiry")

		f.mustOK("Delete", f.b.Delete(f.ctx, backend.DeleteParams{ID: fourth, Now: f.now}))
		f.wantFresh(k, "the holder was deleted")

		deadline := f.now.Add(time.Minute)
		withDeadline := f.wantFresh(backend.NewJob{UniqueKey: "d", Deadline: deadline}, "the key d is free")
		f.now = deadline
		f.promote()
		f.wantState(withDeadline, backend.StateCancelled, "its deadline passed")
		f.wantFresh(backend.NewJob{UniqueKey: "d"}, "the holder was cancelled by its deadline")
	})

	t.Run("Concurrent", func(t *testing.T) {
		// Many producers race to enqueue the same key: exactly one wins and
		// every other is told the winner's id.
		f := start(t, factory)
		const producers = 8
		results := make([]backend.EnqueuedJob, producers)
		errs := make([]error, producers)
		var wg sync.WaitGroup
		for i := range producers {
			wg.Go(func() {
				res, err := f.b.Enqueue(f.ctx, backend.EnqueueParams{Now: f.now, Jobs: []backend.NewJob{
					f.fill(backend.NewJob{UniqueKey: "race"}),
					f.fill(backend.NewJob{UniqueKey: "race-for", UniqueFor: time.Hour}),
				}})
				if err == nil && len(res.Jobs) != 2 {
					err = fmt.Errorf("%d results for 2 jobs", len(res.Jobs))
				}
				if err == nil {
					results[i] = res.Jobs[0]
				}
				errs[i] = err
			})
		}
		wg.Wait()
		winners := map[string]bool{}
		var ids []string
		for i, r := range results {
			if errs[i] != nil {
				t.Fatalf("producer %d: Enqueue: %v", i, errs[i])
			}
			if !r.Duplicate {
				winners[r.ID] = true
			}
			ids = append(ids, r.ID)
		}
		if len(winners) != 1 {
			t.Fatalf("%d concurrent enqueues of one unique key wrote %d jobs; want exactly 1", producers, len(winners))
		}
		for i, id := range ids {
			if !winners[id] {
				t.Errorf("producer %d was told the key is held by %s; want the one job written", i, id)
			}
		}
		if got := f.claim(2 * producers); len(got) != 2 {
			t.Fatalf("after the race %d jobs are claimable; want 2 (one per key)", len(got))
		}
	})

	t.Run("UniqueFor", func(t *testing.T) {
		f := start(t, factory)
		k := backend.NewJob{UniqueKey: "k", UniqueFor: time.Hour}
		first := f.wantFresh(k, "the key is free")
		created := f.now

		j := f.claimID(first, "the only job")
		f.advance(time.Minute)
		f.mustOK("Complete", f.complete(lease(j), nil))
		f.advance(time.Minute)
		r := f.wantDuplicate(k, first, "UniqueFor holds the key for its period even after the job completed")
		if r.State != backend.StateCompleted {
			t.Errorf("Duplicate reports state %q; want the holder's state, completed", r.State)
		}
		f.wantDuplicate(backend.NewJob{UniqueKey: "k"}, first, "the key is held whatever the new job asks for")

		f.advance(time.Minute)
		f.mustOK("Delete", f.b.Delete(f.ctx, backend.DeleteParams{ID: first, Now: f.now}))
		f.wantDuplicate(k, first, "UniqueFor holds the key for its period even after the job is deleted")

		f.now = created.Add(time.Hour - time.Millisecond)
		f.wantDuplicate(k, first, "1ms before CreatedAt+UniqueFor the key is held")
		f.now = created.Add(time.Hour)
		second := f.wantFresh(k, "at CreatedAt+UniqueFor the key is free, before ApplyRetention ran")

		// The new holder has its own period, and ApplyRetention must not cut it short.
		f.now = created.Add(90 * time.Minute)
		f.applyRetention()
		f.wantDuplicate(k, second, "the second job holds the key for its own hour")
		f.now = created.Add(2 * time.Hour)
		f.applyRetention()
		f.wantFresh(k, "the second job's period ended")
	})

	t.Run("UniqueForOutlivesPendingJob", func(t *testing.T) {
		// With UniqueFor the key is held for exactly the period, even while
		// the job still waits: after it two jobs may share the key.
		f := start(t, factory)
		k := backend.NewJob{UniqueKey: "k", UniqueFor: time.Minute}
		first := f.wantFresh(k, "the key is free")
		f.advance(time.Minute)
		f.wantState(first, backend.StatePending, "nothing claimed it")
		second := f.wantFresh(k, "the period ended although the first job still waits")
		if got := f.claim(5); len(got) != 2 {
			t.Fatalf("claimable: %d jobs; want both holders of the key (%s, %s)", len(got), first, second)
		}
	})

	t.Run("UniqueForWithRetainNone", func(t *testing.T) {
		f := start(t, factory)
		k := backend.NewJob{UniqueKey: "k", UniqueFor: time.Hour, Retention: backend.RetainNone}
		first := f.wantFresh(k, "the key is free")
		j := f.claimOne()
		f.mustOK("Complete", f.complete(lease(j), nil))
		f.wantGone(first, "RetainNone deletes the job as it completes")
		f.advance(time.Minute)
		f.applyRetention()
		f.wantDuplicate(k, first, "UniqueFor holds the key for its period even though the job is gone")
		f.now = t0.Add(time.Hour)
		f.wantFresh(k, "the period ended")
	})
}
