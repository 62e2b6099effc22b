package backendtest

import (
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// wantCancelledByDeadline checks that id ended cancelled for its deadline at at.
func (f *fixture) wantCancelledByDeadline(id string, at time.Time, why string) {
	f.t.Helper()
	j := f.wantState(id, backend.StateCancelled, why)
	if j.CancelReason != backend.CancelReasonDeadline {
		f.t.Fatalf("job %s was cancelled with reason %q; want %q", id, j.CancelReason, backend.CancelReasonDeadline)
	}
	f.wantTime("FinishedAt of a job cancelled by its deadline", j.FinishedAt, at)
}

func testDeadline(t *testing.T, factory Factory) {
	t.Run("StartsBeforeDeadline", func(t *testing.T) {
		f := start(t, factory)
		deadline := f.now.Add(time.Minute)
		id := f.enqueueOne(backend.NewJob{Deadline: deadline})
		f.now = deadline.Add(-time.Millisecond)
		j := f.claimID(id, "a job may start while Now < Deadline")

		// Once started, the deadline no longer applies.
		f.now = deadline.Add(time.Second)
		f.promote()
		f.wantState(id, backend.StateActive, "Promote leaves a started job alone")
		f.mustOK("Complete after the deadline of a started job", f.complete(lease(j), nil))
	})

	t.Run("ClaimCancels", func(t *testing.T) {
		f := start(t, factory)
		deadline := f.now.Add(time.Minute)
		expired := f.enqueueOne(backend.NewJob{Deadline: deadline, Priority: 10})
		fresh := f.enqueueOne(backend.NewJob{})
		f.now = deadline
		f.claimID(fresh, "the job past its deadline is never handed out; the next claimable job is")
		f.wantCancelledByDeadline(expired, deadline, "Claim met it at its deadline")
		f.claimNothing("the job past its deadline is cancelled")
	})

	t.Run("ClaimCancelsAlone", func(t *testing.T) {
		f := start(t, factory)
		deadline := f.now.Add(time.Minute)
		expired := f.enqueueOne(backend.NewJob{Deadline: deadline})
		f.now = deadline
		f.claimNothing("the only job is past its deadline")
		f.wantCancelledByDeadline(expired, deadline, "Claim met it at its deadline")
	})

	t.Run("PromoteCancels", func(t *testing.T) {
		f := start(t, factory)
		pending := f.enqueueOne(backend.NewJob{Deadline: f.now.Add(time.Minute)})
		scheduled := f.enqueueOne(backend.NewJob{RunAt: f.now.Add(2*time.Minute - time.Millisecond), Deadline: f.now.Add(2 * time.Minute)})
		retried := f.enqueueOne(backend.NewJob{Deadline: f.now.Add(3 * time.Minute), Priority: 1})
		j := f.claimID(retried, "highest priority")
		f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "later", RetryAt: f.now.Add(time.Hour)}))

		f.now = t0.Add(time.Minute - time.Millisecond)
		f.wantResult("Promote before any deadline", f.promote(), backend.MaintenanceResult{})

		f.now = t0.Add(time.Minute)
		f.wantResult("Promote at the pending job's deadline", f.promote(), backend.MaintenanceResult{Cancelled: 1})
		f.wantCancelledByDeadline(pending, f.now, "Promote cancels a pending job at its deadline")
		f.wantState(scheduled, backend.StateScheduled, "its run-at has not come")

		f.now = t0.Add(2 * time.Minute)
		res := f.promote()
		if res.Cancelled != 1 {
			t.Fatalf("Promote at the scheduled job's deadline, just past its run-at = %+v; want Cancelled 1", res)
		}
		f.wantCancelledByDeadline(scheduled, f.now, "a scheduled job whose deadline came is cancelled, not promoted")

		f.now = t0.Add(3 * time.Minute)
		f.wantResult("Promote at the retry job's deadline", f.promote(), backend.MaintenanceResult{Cancelled: 1})
		f.wantCancelledByDeadline(retried, f.now, "a job waiting in retry is cancelled at its deadline")
		f.claimNothing("every job is cancelled")
	})
}
