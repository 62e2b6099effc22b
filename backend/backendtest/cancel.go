package backendtest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// cancel asks the store to cancel id at f.now.
func (f *fixture) cancel(id string) (*backend.Job, error) {
	f.t.Helper()
	return f.b.Cancel(f.ctx, backend.CancelParams{ID: id, Now: f.now})
}

// mustCancel cancels id at f.now, fails the test on error, and checks that
// the job returned is id.
func (f *fixture) mustCancel(id string) *backend.Job {
	f.t.Helper()
	j, err := f.cancel(id)
	if err != nil {
		f.t.Fatalf("Cancel(%s) at %s: %v", id, stamp(f.now), err)
	}
	if j == nil || j.ID != id {
		f.t.Fatalf("Cancel(%s) returned job %v; want the job itself", id, j)
	}
	return j
}

// wantStateError checks that err is a *backend.StateError for id in state,
// matching backend.ErrWrongState.
func (f *fixture) wantStateError(op string, err error, id string, state backend.State) {
	f.t.Helper()
	var se *backend.StateError
	if !errors.As(err, &se) || !errors.Is(err, backend.ErrWrongState) {
		f.t.Fatalf("%s of a %s job = %v; want a *backend.StateError matching ErrWrongState", op, state, err)
	}
	if se.ID != id || se.State != state {
		f.t.Fatalf("%s: StateError names job %s in state %q; want %s in %q", op, se.ID, se.State, id, state)
	}
}

// wantCancelled checks that id ended cancelled for reason at f.now.
func (f *fixture) wantCancelled(id, reason, why string) *backend.Job {
	f.t.Helper()
	j := f.wantState(id, backend.StateCancelled, why)
	if j.CancelReason != reason {
		f.t.Fatalf("job %s was cancelled with reason %q; want %q: %s", id, j.CancelReason, reason, why)
	}
	f.wantTime("FinishedAt of the cancelled job", j.FinishedAt, f.now)
	return j
}

// lastError returns the job's latest attempt error, failing when it has none.
func (f *fixture) lastError(j *backend.Job) backend.AttemptError {
	f.t.Helper()
	if len(j.Errors) == 0 {
		f.t.Fatalf("job %s has no attempt errors; want one for its last attempt", j.ID)
	}
	return j.Errors[len(j.Errors)-1]
}

// waiting makes a fresh job of j in state (scheduled, pending or retry) and
// returns its id.
func (f *fixture) waiting(state backend.State, j backend.NewJob) string {
	f.t.Helper()
	switch state {
	case backend.StateScheduled:
		j.RunAt = f.now.Add(time.Hour)
		return f.enqueueOne(j)
	case backend.StatePending:
		return f.enqueueOne(j)
	case backend.StateRetry:
		id := f.enqueueOne(j)
		c := f.claimID(id, "the job to send to retry")
		f.mustOK("Fail with a later retry", f.fail(backend.FailItem{Lease: lease(c), Message: "again", RetryAt: f.now.Add(time.Hour)}))
		f.wantState(id, backend.StateRetry, "it failed with a retry an hour on")
		return id
	}
	f.t.Fatalf("waiting: %q is not a waiting state", state)
	return ""
}

func testCancel(t *testing.T, factory Factory) {
	for _, s := range []backend.State{backend.StateScheduled, backend.StatePending, backend.StateRetry} {
		t.Run("Waiting/"+string(s), func(t *testing.T) {
			f := start(t, factory)
			id := f.waiting(s, backend.NewJob{UniqueKey: "k"})
			f.advance(time.Second)
			if got := f.mustCancel(id); got.State != backend.StateCancelled {
				t.Fatalf("Cancel of a %s job returned state %q; want cancelled", s, got.State)
			}
			j := f.wantCancelled(id, backend.CancelReasonRequested, "a "+string(s)+" job is cancelled at once")
			f.wantTime("ExpiresAt of a cancelled job (default retention)", j.ExpiresAt, f.now.Add(backend.DefaultRetentionCancelled))
			if j.CancelRequested {
				t.Errorf("CancelRequested is set on a job cancelled at once; it is for active jobs")
			}
			fresh := f.wantFresh(backend.NewJob{UniqueKey: "k"}, "a cancelled job releases its unique key")
			f.now = f.now.Add(2 * time.Hour)
			f.promote()
			f.claimID(fresh, "the cancelled job never runs; only the new one does")
			f.claimNothing("the cancelled job never runs")
		})
	}

	t.Run("RetainNone", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{Retention: backend.RetainNone})
		if _, err := f.cancel(id); err != nil {
			t.Fatalf("Cancel of a pending RetainNone job: %v", err)
		}
		f.wantGone(id, "RetainNone deletes the job in the step that makes it cancelled")
	})

	// Each way an attempt can end, once the cancel of its active job was
	// requested, ends the job cancelled.
	ends := []struct {
		name string
		kind string // the kind of the attempt's error; "" for none
		end  func(f *fixture, j *backend.Job)
	}{
		{"Complete", "", func(f *fixture, j *backend.Job) {
			f.mustOK("Complete", f.complete(lease(j), []byte("done anyway")))
		}},
		{"FailWithRetry", backend.AttemptFailed, func(f *fixture, j *backend.Job) {
			f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "boom", RetryAt: f.now.Add(time.Minute)}))
		}},
		{"FailRetryNow", backend.AttemptFailed, func(f *fixture, j *backend.Job) {
			f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "boom", RetryAt: f.now}))
		}},
		{"FailFinal", backend.AttemptFailed, func(f *fixture, j *backend.Job) {
			f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "boom", Final: true}))
		}},
		{"Release", backend.AttemptInterrupted, func(f *fixture, j *backend.Job) {
			f.mustOK("Release", f.release(lease(j)))
		}},
		{"LeaseExpiry", backend.AttemptLeaseExpired, func(f *fixture, j *backend.Job) {
			f.now = f.get(j.ID).LeaseExpiresAt
			f.wantResult("RecoverLeases of the cancelled job's lease", f.recoverLeases(), backend.MaintenanceResult{Moved: 1})
		}},
	}
	for _, e := range ends {
		t.Run("Active/"+e.name, func(t *testing.T) {
			f := start(t, factory)
			id := f.enqueueOne(backend.NewJob{UniqueKey: "k", Retention: backend.RetainForever})
			j := f.claimID(id, "the only job")
			f.advance(time.Second)
			got := f.mustCancel(id)
			if got.State != backend.StateActive || !got.CancelRequested {
				t.Fatalf("Cancel of an active job returned state %q, CancelRequested %v; want active, true", got.State, got.CancelRequested)
			}
			stored := f.wantState(id, backend.StateActive, "an active job runs on until its attempt ends")
			if !stored.CancelRequested || stored.LeaseToken != j.LeaseToken {
				t.Fatalf("after Cancel: CancelRequested %v, token %d; want true and the lease untouched (%d)", stored.CancelRequested, stored.LeaseToken, j.LeaseToken)
			}
			f.advance(time.Second)
			st := f.heartbeat(lease(j), testLease)
			if st.Lost || !st.CancelRequested {
				t.Fatalf("Heartbeat after Cancel = %+v; want a live lease with CancelRequested", st)
			}
			f.wantDuplicate(backend.NewJob{UniqueKey: "k"}, id, "the job is still active, so it holds its key")

			f.advance(time.Second)
			errorsBefore := len(stored.Errors)
			e.end(f, j)
			done := f.wantCancelled(id, backend.CancelReasonRequested, "the cancel was requested before the attempt ended by "+e.name)
			switch {
			case e.kind == "" && len(done.Errors) != errorsBefore:
				t.Fatalf("Complete of a cancelled job recorded an attempt error: %+v", done.Errors)
			case e.kind == "" && !bytes.Equal(done.Result, []byte("done anyway")):
				t.Fatalf("Result of a job completed after its cancel = %q; want the result stored", done.Result)
			case e.kind != "":
				if len(done.Errors) != errorsBefore+1 {
					t.Fatalf("job has %d attempt errors after %s; want %d", len(done.Errors), e.name, errorsBefore+1)
				}
				if last := f.lastError(done); last.Kind != e.kind || last.Attempt != 1 {
					t.Fatalf("attempt error after %s = %+v; want kind %q for attempt 1", e.name, last, e.kind)
				}
			}
			f.staleCalls(lease(j), "the job ended cancelled")
			f.now = f.now.Add(time.Hour)
			f.promote()
			f.claimNothing("a cancelled job is not retried")
			f.wantFresh(backend.NewJob{UniqueKey: "k"}, "a cancelled job releases its unique key")
		})
	}

	t.Run("ActiveTwice", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		f.mustCancel(id)
		before := f.get(id)
		f.advance(time.Minute)
		if _, err := f.cancel(id); err != nil {
			t.Fatalf("second Cancel of an active job = %v; want nil (the request is recorded already)", err)
		}
		f.unchanged(before, "a second Cancel of an active job changes nothing")
		f.mustOK("Complete", f.complete(lease(j), nil))
		f.wantCancelled(id, backend.CancelReasonRequested, "the cancel was requested")
	})

	t.Run("Final", func(t *testing.T) {
		f := start(t, factory)
		for _, s := range []backend.State{backend.StateCompleted, backend.StateFailed, backend.StateCancelled} {
			id := f.finish(backend.RetainForever, s)
			before := f.get(id)
			f.advance(time.Second)
			_, err := f.cancel(id)
			f.wantStateError("Cancel", err, id, s)
			f.unchanged(before, "Cancel of a final job is refused")
		}
	})

	t.Run("UnknownID", func(t *testing.T) {
		f := start(t, factory)
		_, err := f.cancel(f.unknownID())
		f.mustErr("Cancel of an unknown id", err, backend.ErrNotFound, "no job has this id")
	})

	t.Run("ZeroNow", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{})
		before := f.get(id)
		_, err := f.b.Cancel(f.ctx, backend.CancelParams{ID: id})
		wantInvalid(t, err, -1, "now")
		f.unchanged(before, "a Cancel without the caller's clock changes nothing")
	})

	t.Run("Handler", func(t *testing.T) {
		items := map[string]func(l backend.Lease, now time.Time) backend.FailItem{
			"WithRetry": func(l backend.Lease, now time.Time) backend.FailItem {
				return backend.FailItem{Lease: l, Message: "no longer wanted", Cancel: true, RetryAt: now.Add(time.Minute)}
			},
			"WinsOverFinal": func(l backend.Lease, now time.Time) backend.FailItem {
				return backend.FailItem{Lease: l, Message: "no longer wanted", Cancel: true, Final: true}
			},
		}
		for name, item := range items {
			t.Run(name, func(t *testing.T) {
				f := start(t, factory)
				id := f.enqueueOne(backend.NewJob{Retention: backend.RetainForever})
				j := f.claimOne()
				f.advance(time.Second)
				f.mustOK("Fail with Cancel", f.fail(item(lease(j), f.now)))
				done := f.wantCancelled(id, backend.CancelReasonHandler, "the handler cancelled its job")
				last := f.lastError(done)
				if last.Kind != backend.AttemptCancelled || last.Message != "no longer wanted" || last.Attempt != 1 {
					t.Fatalf("attempt error = %+v; want kind %q, the message, attempt 1", last, backend.AttemptCancelled)
				}
				f.wantTime("cancelled attempt error At", last.At, f.now)
				f.wantTime("ExpiresAt", done.ExpiresAt, time.Time{})
				f.now = f.now.Add(time.Hour)
				f.promote()
				f.claimNothing("a job its handler cancelled is not retried")
			})
		}
	})
}
