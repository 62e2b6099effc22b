package backendtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

func testRetry(t *testing.T, factory Factory) {
	t.Run("Later", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		f.advance(time.Second)
		retryAt := f.now.Add(10 * time.Second)
		f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "boom", Stack: "main.go:1", RetryAt: retryAt}))
		got := f.wantState(id, backend.StateRetry, "Fail with RetryAt after Now waits in retry")
		f.wantTime("RunAt of a job in retry", got.RunAt, retryAt)
		if got.Attempt != 1 || len(got.Errors) != 1 {
			t.Fatalf("Attempt, Errors = %d, %+v; want 1 and one error", got.Attempt, got.Errors)
		}
		e := got.Errors[0]
		if e.Attempt != 1 || e.Kind != backend.AttemptFailed || e.Message != "boom" || e.Stack != "main.go:1" {
			t.Fatalf("attempt error = %+v; want attempt 1, kind failed, message boom, stack main.go:1", e)
		}
		f.wantTime("attempt error At", e.At, f.now)
		f.staleCalls(lease(j), "the attempt ended with Fail")
		f.claimNothing("a job in retry is not claimable before its retry time")

		f.now = retryAt.Add(-time.Millisecond)
		f.wantResult("Promote 1ms before the retry time", f.promote(), backend.MaintenanceResult{})
		f.claimNothing("the retry time has not come")
		f.now = retryAt
		f.wantResult("Promote at the retry time", f.promote(), backend.MaintenanceResult{Moved: 1})
		f.wantState(id, backend.StatePending, "Promote moves a retry job whose time has come")
		again := f.claimID(id, "a promoted retry is claimable")
		if again.Attempt != 2 || again.LeaseToken != j.LeaseToken+1 {
			t.Fatalf("second claim gave attempt %d, token %d; want 2, %d", again.Attempt, again.LeaseToken, j.LeaseToken+1)
		}
	})

	t.Run("AtOnce", func(t *testing.T) {
		for name, offset := range map[string]time.Duration{"RetryAtNow": 0, "RetryAtPast": -time.Minute, "RetryAtZero": -1} {
			t.Run(name, func(t *testing.T) {
				f := start(t, factory)
				id := f.enqueueOne(backend.NewJob{})
				j := f.claimOne()
				f.advance(time.Second)
				retryAt := f.now.Add(offset)
				if offset == -1 {
					retryAt = time.Time{}
				}
				f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "boom", RetryAt: retryAt}))
				f.wantState(id, backend.StatePending, "Fail with a RetryAt not after Now makes the job pending at once")
				f.claimID(id, "no Promote is needed")
			})
		}
	})

	t.Run("Final", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{Retention: backend.RetainForever})
		j := f.claimOne()
		f.advance(time.Second)
		f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "permanent", RetryAt: f.now.Add(time.Minute), Final: true}))
		got := f.wantState(id, backend.StateFailed, "Final skips the remaining 24 attempts")
		f.wantTime("FinishedAt", got.FinishedAt, f.now)
		if len(got.Errors) != 1 || got.Errors[0].Message != "permanent" || got.Errors[0].Kind != backend.AttemptFailed {
			t.Fatalf("Errors = %+v; want the one failed attempt", got.Errors)
		}
		f.now = f.now.Add(time.Hour)
		f.promote()
		f.claimNothing("a failed job never runs again")
	})

	t.Run("ErrorKindsInOrder", func(t *testing.T) {
		// Every way an attempt can end unsuccessfully is recorded, in order.
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		f.mustOK("Release", f.release(lease(j)))
		j = f.claimOne()
		f.now = j.LeaseExpiresAt
		f.recoverLeases()
		j = f.claimOne()
		f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "boom", RetryAt: f.now}))
		got := f.wantState(id, backend.StatePending, "attempts are left")
		type rec struct {
			attempt int
			kind    string
		}
		want := []rec{{1, backend.AttemptInterrupted}, {1, backend.AttemptLeaseExpired}, {2, backend.AttemptFailed}}
		if len(got.Errors) != len(want) {
			t.Fatalf("job has %d attempt errors %+v; want %d", len(got.Errors), got.Errors, len(want))
		}
		for i, w := range want {
			if e := got.Errors[i]; e.Attempt != w.attempt || e.Kind != w.kind {
				t.Errorf("error %d = attempt %d kind %q; want attempt %d kind %q", i, e.Attempt, e.Kind, w.attempt, w.kind)
			}
		}
		if got.Attempt != 2 {
			t.Errorf("Attempt = %d; want 2 (released attempts are not counted)", got.Attempt)
		}
	})

	t.Run("AttemptsUsedUp", func(t *testing.T) {
		f := start(t, factory)
		const max = 3
		id := f.enqueueOne(backend.NewJob{MaxAttempts: max, Retention: backend.RetainForever})
		for n := 1; n <= max; n++ {
			j := f.claimID(id, "the job has attempts left")
			if j.Attempt != n {
				t.Fatalf("claim %d gave Attempt %d", n, j.Attempt)
			}
			f.advance(time.Second)
			f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: fmt.Sprintf("error %d", n), Stack: fmt.Sprintf("stack %d", n), RetryAt: f.now.Add(time.Minute)}))
			want := backend.StateRetry
			if n == max {
				want = backend.StateFailed
			}
			f.wantState(id, want, fmt.Sprintf("attempt %d of %d failed", n, max))
			f.advance(time.Minute)
			f.promote()
		}
		got := f.get(id)
		if len(got.Errors) != max {
			t.Fatalf("job has %d attempt errors; want one per attempt (%d)", len(got.Errors), max)
		}
		for i, e := range got.Errors {
			n := i + 1
			if e.Attempt != n || e.Kind != backend.AttemptFailed || e.Message != fmt.Sprintf("error %d", n) || e.Stack != fmt.Sprintf("stack %d", n) {
				t.Errorf("error %d = %+v; want attempt %d, kind failed, message and stack %d, in attempt order", i, e, n, n)
			}
		}
		f.claimNothing("a failed job never runs again")
	})
}
