package backendtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

func testMaintenance(t *testing.T, factory Factory) {
	t.Run("PromoteCounts", func(t *testing.T) {
		f := start(t, factory)
		for i := range 3 {
			f.enqueueOne(backend.NewJob{RunAt: f.now.Add(time.Duration(i+1) * time.Second)})
		}
		notDue := f.enqueueOne(backend.NewJob{RunAt: f.now.Add(time.Hour)})
		f.enqueueN(2)
		for _, j := range f.claim(2) {
			f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "retry", RetryAt: f.now.Add(time.Second)}))
		}
		f.now = t0.Add(3 * time.Second)
		f.wantResult("Promote of 3 due scheduled and 2 due retry jobs", f.promote(), backend.MaintenanceResult{Moved: 5})
		f.wantResult("Promote again", f.promote(), backend.MaintenanceResult{})
		f.wantState(notDue, backend.StateScheduled, "its run-at is an hour away")
		if got := f.claim(10); len(got) != 5 {
			t.Fatalf("after Promote %d jobs are claimable; want 5", len(got))
		}
	})

	t.Run("PromoteLimit", func(t *testing.T) {
		f := start(t, factory)
		for range 5 {
			f.enqueueOne(backend.NewJob{RunAt: f.now.Add(time.Second)})
		}
		f.now = t0.Add(time.Second)
		for i, want := range []int{2, 2, 1, 0} {
			if res := f.maintenance("Promote", f.b.Promote, 2); res.Moved != want {
				t.Fatalf("Promote(limit 2) step %d over 5 due jobs moved %d; want %d", i+1, res.Moved, want)
			}
		}
	})

	t.Run("RecoverCounts", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueN(3)
		f.enqueueOne(backend.NewJob{MaxAttempts: 1, Priority: -1})
		expiring := f.claim(4)
		if len(expiring) != 4 {
			t.Fatalf("Claim(max 4) returned %d jobs; want 4", len(expiring))
		}
		live := f.enqueueOne(backend.NewJob{})
		f.advance(time.Minute)
		p := f.claimParams(1)
		p.Lease = time.Hour
		if got := f.claimWith(p); len(got) != 1 || got[0].ID != live {
			t.Fatalf("claim of the live job returned %v; want %s", ids(got), live)
		}
		f.now = t0.Add(testLease)
		f.wantResult("RecoverLeases of 4 expired leases (one on its last attempt) and 1 live",
			f.recoverLeases(), backend.MaintenanceResult{Moved: 4, Failed: 1})
		f.wantResult("RecoverLeases again", f.recoverLeases(), backend.MaintenanceResult{})
		f.wantState(live, backend.StateActive, "its lease is live")
	})

	t.Run("RecoverLimit", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueN(5)
		f.claim(5)
		f.now = t0.Add(testLease)
		for i, want := range []int{2, 2, 1, 0} {
			if res := f.maintenance("RecoverLeases", f.b.RecoverLeases, 2); res.Moved != want {
				t.Fatalf("RecoverLeases(limit 2) step %d over 5 expired leases moved %d; want %d", i+1, res.Moved, want)
			}
		}
	})

	t.Run("LimitAcrossQueues", func(t *testing.T) {
		f := start(t, factory)
		// One call covers every queue, and Limit bounds the call, not
		// each queue: 2, 3 and 4 due jobs in three queues, limit 4.
		for i, n := range []int{2, 3, 4} {
			q := uniqueQueue(t, fmt.Sprint("-", i))
			for range n {
				f.enqueueOne(backend.NewJob{Queue: q, RunAt: f.now.Add(time.Second)})
			}
		}
		f.now = t0.Add(time.Second)
		total := 0
		for step := 1; ; step++ {
			res := f.maintenance("Promote", f.b.Promote, 4)
			if res.Moved > 4 {
				t.Fatalf("Promote(limit 4) step %d over three queues moved %d jobs; want at most 4", step, res.Moved)
			}
			total += res.Moved
			if res.Moved < 4 {
				break
			}
			if step > 9 {
				t.Fatal("Promote(limit 4) keeps reporting 4 moved jobs after 9 due jobs")
			}
		}
		if total != 9 {
			t.Fatalf("Promote(limit 4), repeated while it reports 4 jobs, moved %d of the 9 due jobs in three queues", total)
		}
	})

	t.Run("EmptyStore", func(t *testing.T) {
		f := start(t, factory)
		f.wantResult("Promote of an empty store", f.promote(), backend.MaintenanceResult{})
		f.wantResult("RecoverLeases of an empty store", f.recoverLeases(), backend.MaintenanceResult{})
		f.wantResult("ApplyRetention of an empty store", f.applyRetention(), backend.MaintenanceResult{})
	})
}
