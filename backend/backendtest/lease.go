package backendtest

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// staleCalls tries every call that presents a lease with l at f.now and
// checks that each is refused and changes nothing.
func (f *fixture) staleCalls(l backend.Lease, why string) {
	f.t.Helper()
	before := f.get(l.JobID)
	if st := f.heartbeat(l, time.Hour); !st.Lost {
		f.t.Fatalf("Heartbeat with token %d reported the lease live; want Lost: %s", l.Token, why)
	}
	f.unchanged(before, "Heartbeat with token "+itoa(l.Token)+" was refused")
	f.mustErr("Complete", f.complete(l, []byte("stale")), backend.ErrLeaseLost, why)
	f.unchanged(before, "Complete with token "+itoa(l.Token)+" was refused")
	f.mustErr("Fail", f.fail(backend.FailItem{Lease: l, Message: "stale"}), backend.ErrLeaseLost, why)
	f.unchanged(before, "Fail with token "+itoa(l.Token)+" was refused")
	f.mustErr("Fail(final)", f.fail(backend.FailItem{Lease: l, Message: "stale", Final: true}), backend.ErrLeaseLost, why)
	f.unchanged(before, "Fail(final) with token "+itoa(l.Token)+" was refused")
	f.mustErr("Release", f.release(l), backend.ErrLeaseLost, why)
	f.unchanged(before, "Release with token "+itoa(l.Token)+" was refused")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func testFencing(t *testing.T, factory Factory) {
	t.Run("StaleToken", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueOne(backend.NewJob{})
		first := f.claimOne()
		f.mustOK("Release", f.release(lease(first)))
		second := f.claimOne()
		if second.LeaseToken <= first.LeaseToken || second.LeaseToken != first.LeaseToken+1 {
			t.Fatalf("second claim gave token %d after %d; want one more", second.LeaseToken, first.LeaseToken)
		}
		f.staleCalls(lease(first), "the token is from an earlier claim")
		f.staleCalls(backend.Lease{JobID: second.ID, Token: second.LeaseToken + 1}, "the token is not the job's (from the future)")
		f.staleCalls(backend.Lease{JobID: second.ID, Token: 0}, "token 0 is never handed out")
		f.mustOK("Complete with the live token", f.complete(lease(second), nil))
	})

	t.Run("TokensGrow", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{})
		for want := int64(1); want <= 5; want++ {
			j := f.claimID(id, "the only job")
			if j.LeaseToken != want {
				t.Fatalf("claim %d gave token %d; want %d (one more than the job's previous token)", want, j.LeaseToken, want)
			}
			if want%2 == 0 {
				f.mustOK("Release", f.release(lease(j)))
			} else {
				f.now = j.LeaseExpiresAt
				f.recoverLeases()
			}
		}
	})

	t.Run("AfterRelease", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		f.mustOK("Release", f.release(lease(j)))
		f.staleCalls(lease(j), "the lease was released")
		f.wantState(j.ID, backend.StatePending, "a released job waits")
	})

	t.Run("AfterComplete", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueOne(backend.NewJob{Retention: backend.RetainForever})
		j := f.claimOne()
		f.mustOK("Complete", f.complete(lease(j), []byte("ok")))
		f.staleCalls(lease(j), "the job is completed")
		f.wantState(j.ID, backend.StateCompleted, "a second Complete changes nothing")
	})

	t.Run("ExpiredNotRecovered", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		f.now = j.LeaseExpiresAt
		f.staleCalls(lease(j), "the lease is dead from LeaseExpiresAt on, even before RecoverLeases")
		f.wantState(j.ID, backend.StateActive, "nothing recovered it yet")
	})

	t.Run("LiveUntilExpiry", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		f.now = j.LeaseExpiresAt.Add(-time.Millisecond)
		f.mustOK("Complete 1ms before the lease expires", f.complete(lease(j), nil))
		f.wantState(j.ID, backend.StateCompleted, "the lease was live")
	})

	t.Run("UnknownID", func(t *testing.T) {
		f := start(t, factory)
		id := f.unknownID()
		l := backend.Lease{JobID: id, Token: 1}
		f.wantGone(id, "no job has this id")
		f.mustErr("Delete", f.b.Delete(f.ctx, backend.DeleteParams{ID: id, Now: f.now}), backend.ErrNotFound, "no job has this id")
		f.mustErr("Complete", f.complete(l, nil), backend.ErrNotFound, "no job has this id")
		f.mustErr("Fail", f.fail(backend.FailItem{Lease: l, Message: "x"}), backend.ErrNotFound, "no job has this id")
		f.mustErr("Release", f.release(l), backend.ErrNotFound, "no job has this id")
		if st := f.heartbeat(l, time.Minute); !st.Lost {
			t.Fatalf("Heartbeat of an unknown id reported a live lease; want Lost")
		}
	})

	t.Run("ItemsStandAlone", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueN(3)
		jobs := f.claim(3)
		if len(jobs) != 3 {
			t.Fatalf("Claim(max 3) returned %d jobs; want 3", len(jobs))
		}
		stale := lease(jobs[1])
		stale.Token++
		unknown := backend.Lease{JobID: f.unknownID(), Token: 1}
		before := f.get(jobs[1].ID)
		res, err := f.b.Complete(f.ctx, backend.CompleteParams{Now: f.now, Items: []backend.CompleteItem{
			{Lease: lease(jobs[0])}, {Lease: stale}, {Lease: unknown}, {Lease: lease(jobs[2])},
		}})
		if err != nil {
			t.Fatalf("Complete with mixed items: %v; want per-item errors", err)
		}
		want := []error{nil, backend.ErrLeaseLost, backend.ErrNotFound, nil}
		if len(res.Errors) != len(want) {
			t.Fatalf("Complete of 4 items returned %d errors; want 4", len(res.Errors))
		}
		for i, w := range want {
			if !errors.Is(res.Errors[i], w) || (w == nil && res.Errors[i] != nil) {
				t.Errorf("Complete item %d error = %v; want %v", i, res.Errors[i], w)
			}
		}
		f.wantState(jobs[0].ID, backend.StateCompleted, "its item was good")
		f.wantState(jobs[2].ID, backend.StateCompleted, "its item was good, after two bad ones")
		f.unchanged(before, "its item had a wrong token")

		// Fail and Release stand alone per item too.
		f.enqueueN(2)
		jobs = f.claim(2)
		if len(jobs) != 2 {
			t.Fatalf("Claim(max 2) returned %d jobs; want 2", len(jobs))
		}
		fres, err := f.b.Fail(f.ctx, backend.FailParams{Now: f.now, Items: []backend.FailItem{
			{Lease: unknown, Message: "x"}, {Lease: lease(jobs[0]), Message: "boom", Final: true},
		}})
		if err != nil || len(fres.Errors) != 2 || !errors.Is(fres.Errors[0], backend.ErrNotFound) || fres.Errors[1] != nil {
			t.Fatalf("Fail of [unknown, live] = %v, %v; want [ErrNotFound, nil]", fres.Errors, err)
		}
		f.wantState(jobs[0].ID, backend.StateFailed, "its Final fail item was good")
		rres, err := f.b.Release(f.ctx, backend.ReleaseParams{Now: f.now, Leases: []backend.Lease{lease(jobs[0]), lease(jobs[1])}})
		if err != nil || len(rres.Errors) != 2 || !errors.Is(rres.Errors[0], backend.ErrLeaseLost) || rres.Errors[1] != nil {
			t.Fatalf("Release of [failed job, live] = %v, %v; want [ErrLeaseLost, nil]", rres.Errors, err)
		}
		f.wantState(jobs[1].ID, backend.StatePending, "its release item was good")
	})
}

func testHeartbeat(t *testing.T, factory Factory) {
	t.Run("Extends", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		oldExpiry := j.LeaseExpiresAt
		f.now = oldExpiry.Add(-time.Second)
		st := f.heartbeat(lease(j), time.Minute)
		if st.Lost || st.CancelRequested {
			t.Fatalf("Heartbeat of a live lease = %+v; want not lost, no cancel request", st)
		}
		f.wantTime("Heartbeat ExpiresAt", st.ExpiresAt, f.now.Add(time.Minute))
		got := f.get(j.ID)
		f.wantTime("LeaseExpiresAt after heartbeat", got.LeaseExpiresAt, f.now.Add(time.Minute))
		if got.LeaseToken != j.LeaseToken || got.State != backend.StateActive {
			t.Fatalf("Heartbeat changed the token to %d or the state to %q", got.LeaseToken, got.State)
		}

		f.now = oldExpiry
		f.wantResult("RecoverLeases at the old expiry", f.recoverLeases(), backend.MaintenanceResult{})
		f.wantState(j.ID, backend.StateActive, "the heartbeat extended the lease")
		f.now = oldExpiry.Add(30 * time.Second)
		f.mustOK("Complete after the old expiry, within the extended lease", f.complete(lease(j), nil))
	})

	t.Run("Lost", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueN(2)
		jobs := f.claim(2)
		if len(jobs) != 2 {
			t.Fatalf("Claim(max 2) returned %d jobs; want 2", len(jobs))
		}
		f.mustOK("Release", f.release(lease(jobs[1])))
		before := f.get(jobs[1].ID)
		res, err := f.b.Heartbeat(f.ctx, backend.HeartbeatParams{Leases: []backend.Lease{lease(jobs[0]), lease(jobs[1])}, Extend: time.Hour, Now: f.now})
		if err != nil {
			t.Fatalf("Heartbeat: %v", err)
		}
		if len(res.Leases) != 2 || res.Leases[0].Lost || !res.Leases[1].Lost {
			t.Fatalf("Heartbeat of [live, released] = %+v; want [live, lost]", res.Leases)
		}
		f.unchanged(before, "its heartbeat was lost")
	})

	t.Run("AtExpiry", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		f.now = j.LeaseExpiresAt
		before := f.get(j.ID)
		if st := f.heartbeat(lease(j), time.Hour); !st.Lost {
			t.Fatalf("Heartbeat at LeaseExpiresAt reported a live lease; a lease is dead from its expiry on")
		}
		f.unchanged(before, "a dead lease cannot be revived by Heartbeat")
	})
}

func testLeaseExpiry(t *testing.T, factory Factory) {
	t.Run("BackToPending", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		f.now = j.LeaseExpiresAt.Add(-time.Millisecond)
		f.wantResult("RecoverLeases 1ms before expiry", f.recoverLeases(), backend.MaintenanceResult{})
		f.wantState(id, backend.StateActive, "the lease is still live")

		f.now = j.LeaseExpiresAt
		f.wantResult("RecoverLeases at expiry", f.recoverLeases(), backend.MaintenanceResult{Moved: 1})
		got := f.wantState(id, backend.StatePending, "an expired lease with attempts left goes back to pending")
		if got.Attempt != 1 {
			t.Errorf("Attempt after recovery = %d; want 1 (an expired lease used its attempt)", got.Attempt)
		}
		if len(got.Errors) != 1 || got.Errors[0].Kind != backend.AttemptLeaseExpired || got.Errors[0].Attempt != 1 {
			t.Fatalf("Errors after recovery = %+v; want one of kind %q for attempt 1", got.Errors, backend.AttemptLeaseExpired)
		}
		f.wantTime("lease_expired error At", got.Errors[0].At, f.now)
		f.wantTime("RunAt after recovery", got.RunAt, j.RunAt)
		f.staleCalls(lease(j), "the lease was recovered")

		again := f.claimID(id, "a recovered job is claimable at once")
		if again.LeaseToken != j.LeaseToken+1 || again.Attempt != 2 {
			t.Fatalf("claim after recovery gave token %d, attempt %d; want %d, 2", again.LeaseToken, again.Attempt, j.LeaseToken+1)
		}
		f.wantResult("RecoverLeases with a live lease", f.recoverLeases(), backend.MaintenanceResult{})
	})

	t.Run("ClaimerClockBehind", func(t *testing.T) {
		// The producer's clock is ten minutes ahead of the claimer's, and the
		// lease ends before the job's RunAt: recovered, the job is pending
		// with its RunAt kept in the future, and still claimable at once.
		f := start(t, factory)
		f.at(10 * time.Minute)
		id := f.enqueueOne(backend.NewJob{})
		f.at(0)
		j := f.claimID(id, "a pending job is claimable whatever the claimer's clock says")
		f.now = j.LeaseExpiresAt
		if !f.now.Before(j.RunAt) {
			t.Fatalf("the suite's lease (%s) must end before the job's RunAt %s for this test", testLease, stamp(j.RunAt))
		}
		f.wantResult("RecoverLeases at expiry", f.recoverLeases(), backend.MaintenanceResult{Moved: 1})
		got := f.wantState(id, backend.StatePending, "a recovered job goes back to pending whatever its RunAt")
		f.wantTime("RunAt after recovery", got.RunAt, j.RunAt)
		f.claimID(id, "a recovered pending job is claimable before its RunAt")
	})

	t.Run("Exhausted", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{MaxAttempts: 2, Retention: backend.RetainForever})
		j := f.claimOne()
		f.now = j.LeaseExpiresAt
		f.wantResult("RecoverLeases, attempt 1 of 2", f.recoverLeases(), backend.MaintenanceResult{Moved: 1})
		j = f.claimOne()
		f.now = j.LeaseExpiresAt.Add(time.Hour)
		f.wantResult("RecoverLeases, attempt 2 of 2", f.recoverLeases(), backend.MaintenanceResult{Moved: 1, Failed: 1})
		got := f.wantState(id, backend.StateFailed, "the expired lease used the last attempt")
		f.wantTime("FinishedAt", got.FinishedAt, f.now)
		if got.Attempt != 2 || len(got.Errors) != 2 || got.Errors[0].Kind != backend.AttemptLeaseExpired || got.Errors[1].Kind != backend.AttemptLeaseExpired {
			t.Fatalf("Attempt, Errors = %d, %+v; want 2 and two lease_expired errors", got.Attempt, got.Errors)
		}
		f.staleCalls(lease(j), "the job failed by lease expiry")
		f.claimNothing("a failed job is not claimable")
	})
}

func testRelease(t *testing.T, factory Factory) {
	t.Run("BackToPending", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		f.advance(time.Second)
		f.mustOK("Release", f.release(lease(j)))
		got := f.wantState(id, backend.StatePending, "a released job goes back to pending at once")
		if got.Attempt != 0 {
			t.Errorf("Attempt after release = %d; want 0 (a released attempt is not counted)", got.Attempt)
		}
		if len(got.Errors) != 1 || got.Errors[0].Kind != backend.AttemptInterrupted || got.Errors[0].Attempt != 1 {
			t.Fatalf("Errors after release = %+v; want one of kind %q for attempt 1", got.Errors, backend.AttemptInterrupted)
		}
		f.wantTime("interrupted error At", got.Errors[0].At, f.now)
		f.wantTime("RunAt after release", got.RunAt, j.RunAt)
		f.staleCalls(lease(j), "the lease was released")

		again := f.claimID(id, "a released job is claimable at once, at the same Now")
		if again.Attempt != 1 || again.LeaseToken != j.LeaseToken+1 {
			t.Fatalf("claim after release gave attempt %d, token %d; want 1, %d", again.Attempt, again.LeaseToken, j.LeaseToken+1)
		}
	})

	t.Run("NotCounted", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{MaxAttempts: 1, Retention: backend.RetainForever})
		for range 3 {
			j := f.claimID(id, "released attempts do not use up MaxAttempts")
			f.mustOK("Release", f.release(lease(j)))
		}
		j := f.claimID(id, "released attempts do not use up MaxAttempts")
		f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "boom", RetryAt: f.now}))
		got := f.wantState(id, backend.StateFailed, "the one counted attempt failed")
		if len(got.Errors) != 4 {
			t.Fatalf("job has %d attempt errors; want 4 (3 interrupted, 1 failed)", len(got.Errors))
		}
	})
}
