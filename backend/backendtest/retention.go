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
			f.wantTime("ExpiresAt", j.ExpiresAt, finished.Add(c.keep))

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
			f.wantTime("ExpiresAt of a job kept forever", f.get(id).ExpiresAt, time.Time{})
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
		f.claimID(active, "next priority")
		f.now = t0.Add(10 * 365 * 24 * time.Hour)
		f.wantResult("ApplyRetention ten years on with no final job", f.applyRetention(), backend.MaintenanceResult{})
		f.wantState(pending, backend.StatePending, "retention never deletes a pending job")
		f.wantState(scheduled, backend.StateScheduled, "retention never deletes a scheduled job")
		f.wantState(retry, backend.StateRetry, "retention never deletes a job in retry")
		f.wantState(active, backend.StateActive, "retention never deletes an active job, even with an expired lease")
		for _, id := range []string{pending, scheduled, retry, active} {
			f.wantTime("ExpiresAt of a job that is not final", f.get(id).ExpiresAt, time.Time{})
		}
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

// wantExpires checks that id expires at at: kept by ApplyRetention 1ms
// before, deleted at at exactly.
func (f *fixture) wantExpires(id string, at time.Time, why string) {
	f.t.Helper()
	f.wantTime("ExpiresAt of "+id, f.get(id).ExpiresAt, at)
	back := f.now
	f.now = at.Add(-time.Millisecond)
	f.applyRetention()
	f.get(id)
	f.now = at
	f.applyRetention()
	f.wantGone(id, "ApplyRetention deletes a final job when Now >= ExpiresAt: "+why)
	f.now = back
}

func testQueueRetention(t *testing.T, factory Factory) {
	override := func(s backend.State, r backend.Retention) backend.QueueRetention {
		var q backend.QueueRetention
		switch s {
		case backend.StateCompleted:
			q.Completed = r
		case backend.StateFailed:
			q.Failed = r
		case backend.StateCancelled:
			q.Cancelled = r
		}
		return q
	}
	finals := []backend.State{backend.StateCompleted, backend.StateFailed, backend.StateCancelled}

	for _, s := range finals {
		t.Run("Override/"+string(s), func(t *testing.T) {
			f := start(t, factory)
			q := override(s, backend.RetainFor(90*time.Minute))
			f.updateQueue(backend.UpdateQueueParams{Retention: &q})
			f.advance(time.Second)
			id := f.finish(backend.RetainDefault, s)
			f.wantExpires(id, f.now.Add(90*time.Minute), "the queue's override for "+string(s))
		})

		t.Run("OtherStatesDefault/"+string(s), func(t *testing.T) {
			f := start(t, factory)
			// Every other state is overridden; s keeps its default.
			q := backend.QueueRetention{Completed: backend.RetainNone, Failed: backend.RetainNone, Cancelled: backend.RetainNone}
			switch s {
			case backend.StateCompleted:
				q.Completed = backend.RetainDefault
			case backend.StateFailed:
				q.Failed = backend.RetainDefault
			case backend.StateCancelled:
				q.Cancelled = backend.RetainDefault
			}
			f.updateQueue(backend.UpdateQueueParams{Retention: &q})
			id := f.finish(backend.RetainDefault, s)
			keep, _ := backend.RetainDefault.Keep(s)
			f.wantExpires(id, f.now.Add(keep), "RetainDefault in an override leaves the state's default")
		})

		t.Run("OverrideNone/"+string(s), func(t *testing.T) {
			f := start(t, factory)
			q := override(s, backend.RetainNone)
			f.updateQueue(backend.UpdateQueueParams{Retention: &q})
			id := f.finish(backend.RetainDefault, s)
			f.wantGone(id, "the queue keeps no "+string(s)+" jobs")
		})

		t.Run("OverrideForever/"+string(s), func(t *testing.T) {
			f := start(t, factory)
			q := override(s, backend.RetainForever)
			f.updateQueue(backend.UpdateQueueParams{Retention: &q})
			id := f.finish(backend.RetainDefault, s)
			f.wantTime("ExpiresAt of a job kept forever", f.get(id).ExpiresAt, time.Time{})
			f.now = t0.Add(10 * 365 * 24 * time.Hour)
			f.wantResult("ApplyRetention ten years on", f.applyRetention(), backend.MaintenanceResult{})
			f.get(id)
		})

		t.Run("JobWins/"+string(s), func(t *testing.T) {
			f := start(t, factory)
			q := backend.QueueRetention{Completed: backend.RetainNone, Failed: backend.RetainNone, Cancelled: backend.RetainNone}
			f.updateQueue(backend.UpdateQueueParams{Retention: &q})
			id := f.finish(backend.RetainFor(2*time.Hour), s)
			f.wantExpires(id, f.now.Add(2*time.Hour), "the job's own retention wins over the queue's")
			forever := f.finish(backend.RetainForever, s)
			f.wantTime("ExpiresAt of a job kept forever", f.get(forever).ExpiresAt, time.Time{})
		})
	}

	t.Run("JobNoneOverQueueForever", func(t *testing.T) {
		f := start(t, factory)
		q := backend.QueueRetention{Completed: backend.RetainForever, Failed: backend.RetainForever, Cancelled: backend.RetainForever}
		f.updateQueue(backend.UpdateQueueParams{Retention: &q})
		for _, s := range finals {
			id := f.finish(backend.RetainNone, s)
			f.wantGone(id, "the job's RetainNone wins over the queue's forever")
		}
	})

	t.Run("ResultGrace", func(t *testing.T) {
		for name, r := range map[string]backend.Retention{"job": backend.RetainNone, "queue": backend.RetainDefault} {
			t.Run(name, func(t *testing.T) {
				f := start(t, factory)
				q := backend.QueueRetention{Completed: backend.RetainNone}
				f.updateQueue(backend.UpdateQueueParams{Retention: &q})
				withResult := f.enqueueOne(backend.NewJob{Retention: r})
				without := f.enqueueOne(backend.NewJob{Retention: r})
				j := f.claimID(withResult, "the first job")
				f.advance(time.Second)
				f.mustOK("Complete with a result", f.complete(lease(j), []byte("answer")))
				if got := f.get(withResult); string(got.Result) != "answer" {
					t.Fatalf("Result kept for the grace = %q; want %q", got.Result, "answer")
				}
				f.wantExpires(withResult, f.now.Add(backend.ResultGrace), "a RetainNone job with a result is kept ResultGrace")
				j = f.claimID(without, "the second job")
				f.mustOK("Complete without a result", f.complete(lease(j), nil))
				f.wantGone(without, "a RetainNone job with no result is deleted at once")
			})
		}
	})

	t.Run("ChangeAppliesToLaterJobs", func(t *testing.T) {
		f := start(t, factory)
		q := backend.QueueRetention{Completed: backend.RetainFor(time.Hour)}
		f.updateQueue(backend.UpdateQueueParams{Retention: &q})
		early := f.finish(backend.RetainDefault, backend.StateCompleted)
		earlyAt := f.now.Add(time.Hour)
		q = backend.QueueRetention{Completed: backend.RetainFor(3 * time.Hour)}
		f.updateQueue(backend.UpdateQueueParams{Retention: &q})
		f.advance(time.Minute)
		late := f.finish(backend.RetainDefault, backend.StateCompleted)
		lateAt := f.now.Add(3 * time.Hour)
		q = backend.QueueRetention{Completed: backend.RetainNone}
		f.updateQueue(backend.UpdateQueueParams{Retention: &q})
		f.wantExpires(early, earlyAt, "the override when it finished was 1h")
		f.wantExpires(late, lateAt, "the override when it finished was 3h")
	})

	t.Run("OtherQueue", func(t *testing.T) {
		f := start(t, factory)
		q := backend.QueueRetention{Completed: backend.RetainNone}
		f.updateQueue(backend.UpdateQueueParams{Queue: uniqueQueue(t, "-other"), Retention: &q})
		id := f.finish(backend.RetainDefault, backend.StateCompleted)
		f.wantExpires(id, f.now.Add(backend.DefaultRetentionCompleted), "another queue's override does not apply")
	})
}
