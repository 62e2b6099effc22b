package backendtest

import (
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// finish drives a fresh job with retention r to state s at f.now and
// returns its id.
func (f *fixture) finish(r backend.Retention, s backend.State) string {
	f.t.Helper()
	switch s {
	case backend.StateCancelled:
		// Enqueued 1ms before its deadline, which is now.
		now := f.now
		f.now = now.Add(-time.Millisecond)
		id := f.enqueueOne(backend.NewJob{Retention: r, Deadline: now})
		f.now = now
		f.promote()
		return id
	case backend.StateCompleted, backend.StateFailed:
		id := f.enqueueOne(backend.NewJob{Retention: r})
		j := f.claimID(id, "the job to finish")
		if s == backend.StateCompleted {
			f.mustOK("Complete", f.complete(lease(j), nil))
		} else {
			f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "final", Final: true}))
		}
		return id
	}
	f.t.Fatalf("finish: %q is not a final state", s)
	return ""
}

func testRetention(t *testing.T, factory Factory) {
	keeps := []struct {
		name      string
		retention backend.Retention
		state     backend.State
		keep      time.Duration
	}{
		{"DefaultCompleted", backend.RetainDefault, backend.StateCompleted, 24 * time.Hour},
		{"DefaultFailed", backend.RetainDefault, backend.StateFailed, 30 * 24 * time.Hour},
		{"DefaultCancelled", backend.RetainDefault, backend.StateCancelled, 7 * 24 * time.Hour},
		{"ExplicitCompleted", backend.RetainFor(90 * time.Minute), backend.StateCompleted, 90 * time.Minute},
		{"ExplicitFailed", backend.RetainFor(90 * time.Minute), backend.StateFailed, 90 * time.Minute},
		{"ExplicitCancelled", backend.RetainFor(90 * time.Minute), backend.StateCancelled, 90 * time.Minute},
	}
	for _, c := range keeps {
		t.Run(c.name, func(t *testing.T) {
			f := start(t, factory)
			f.advance(time.Second)
			finished := f.now
			id := f.finish(c.retention, c.state)
			j := f.wantState(id, c.state, "it was just finished")
			f.wantTime("FinishedAt", j.FinishedAt, finished)

			f.now = finished.Add(c.keep - time.Millisecond)
			f.wantResult("ApplyRetention 1ms before the job's time", f.applyRetention(), backend.MaintenanceResult{})
			f.wantState(id, c.state, "retention keeps a "+string(c.state)+" job for "+c.keep.String())

			f.now = finished.Add(c.keep)
			f.wantResult("ApplyRetention at FinishedAt+keep", f.applyRetention(), backend.MaintenanceResult{Moved: 1})
			f.wantGone(id, "retention deletes a final job when Now >= FinishedAt+keep")
		})
	}

	t.Run("None", func(t *testing.T) {
		for _, s := range []backend.State{backend.StateCompleted, backend.StateFailed, backend.StateCancelled} {
			t.Run(string(s), func(t *testing.T) {
				f := start(t, factory)
				id := f.finish(backend.RetainNone, s)
				f.wantGone(id, "RetainNone deletes the job in the step that makes it "+string(s))
			})
		}
		t.Run("failedByLeaseExpiry", func(t *testing.T) {
			f := start(t, factory)
			id := f.enqueueOne(backend.NewJob{Retention: backend.RetainNone, MaxAttempts: 1})
			j := f.claimOne()
			f.now = j.LeaseExpiresAt
			f.recoverLeases()
			f.wantGone(id, "RetainNone deletes the job in the step that makes it failed")
		})
		t.Run("cancelledByClaim", func(t *testing.T) {
			f := start(t, factory)
			id := f.enqueueOne(backend.NewJob{Retention: backend.RetainNone, Deadline: f.now.Add(time.Minute)})
			f.advance(time.Minute)
			f.claimNothing("the only job is past its deadline")
			f.wantGone(id, "RetainNone deletes the job in the step that makes it cancelled")
		})
	})

	t.Run("Forever", func(t *testing.T) {
		f := start(t, factory)
		var kept []string
		for _, s := range []backend.State{backend.StateCompleted, backend.StateFailed, backend.StateCancelled} {
			kept = append(kept, f.finish(backend.RetainForever, s))
		}
		f.now = t0.Add(10 * 365 * 24 * time.Hour)
		f.wantResult("ApplyRetention ten years on", f.applyRetention(), backend.MaintenanceResult{})
		for _, id := range kept {
			f.get(id)
		}
	})

	t.Run("NeverUnfinished", func(t *testing.T) {
		f := start(t, factory)
		pending := f.enqueueOne(backend.NewJob{Retention: backend.RetainNone})
		scheduled := f.enqueueOne(backend.NewJob{Retention: backend.RetainNone, RunAt: t0.Add(20 * 365 * 24 * time.Hour)})
		retry := f.enqueueOne(backend.NewJob{Retention: backend.RetainNone, Priority: 2})
		active := f.enqueueOne(backend.NewJob{Retention: backend.RetainNone, Priority: 1})
		j := f.claimID(retry, "highest priority")
		f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "later", RetryAt: t0.Add(20 * 365 * 24 * time.Hour)}))
		j = f.claimID(active, "next priority")
		f.now = t0.Add(10 * 365 * 24 * time.Hour)
		f.wantResult("ApplyRetention ten years on with no final job", f.applyRetention(), backend.MaintenanceResult{})
		f.wantState(pending, backend.StatePending, "retention never deletes a pending job")
		f.wantState(scheduled, backend.StateScheduled, "retention never deletes a scheduled job")
		f.wantState(retry, backend.StateRetry, "retention never deletes a job in retry")
		f.wantState(active, backend.StateActive, "retention never deletes an active job, even with an expired lease")
	})

	t.Run("Limit", func(t *testing.T) {
		f := start(t, factory)
		var done []string
		for range 5 {
			done = append(done, f.finish(backend.RetainDefault, backend.StateCompleted))
		}
		f.now = t0.Add(24 * time.Hour)
		for i, want := range []int{2, 2, 1, 0} {
			res := f.maintenance("ApplyRetention", f.b.ApplyRetention, 2)
			if res.Moved != want {
				t.Fatalf("ApplyRetention(limit 2) step %d over 5 expired jobs deleted %d; want %d", i+1, res.Moved, want)
			}
		}
		for _, id := range done {
			f.wantGone(id, "repeated steps delete every expired job")
		}
	})
}
