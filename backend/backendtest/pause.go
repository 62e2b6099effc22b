package backendtest

import (
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// updateQueue changes queue's settings at f.now and fails the test on error.
func (f *fixture) updateQueue(p backend.UpdateQueueParams) backend.QueueSettings {
	f.t.Helper()
	if p.Queue == "" {
		p.Queue = f.queue
	}
	p.Now = f.now
	qs, err := f.b.UpdateQueue(f.ctx, p)
	if err != nil {
		f.t.Fatalf("UpdateQueue(%s): %v", p.Queue, err)
	}
	return qs
}

// pause pauses or resumes queue.
func (f *fixture) pause(queue string, paused bool) backend.QueueSettings {
	f.t.Helper()
	qs := f.updateQueue(backend.UpdateQueueParams{Queue: queue, Paused: &paused})
	if qs.Paused != paused {
		f.t.Fatalf("UpdateQueue(Paused: %v) returned Paused %v", paused, qs.Paused)
	}
	return qs
}

// settings reads queue's settings through an update that changes nothing.
func (f *fixture) settings(queue string) backend.QueueSettings {
	f.t.Helper()
	return f.updateQueue(backend.UpdateQueueParams{Queue: queue})
}

func testPause(t *testing.T, factory Factory) {
	for _, mode := range []backend.ClaimMode{backend.ClaimStrict, backend.ClaimWeighted} {
		t.Run("HoldsBackClaims/"+string(mode), func(t *testing.T) {
			f := start(t, factory)
			other := uniqueQueue(t, "-other")
			f.pause(f.queue, true)
			paused := f.enqueueN(3)
			running := []string{f.enqueueOne(backend.NewJob{Queue: other}), f.enqueueOne(backend.NewJob{Queue: other})}
			p := f.claimParams(10)
			p.Queues, p.Mode, p.Weights = []string{f.queue, other}, mode, map[string]int{f.queue: 1000, other: 1}
			got := f.claimWith(p)
			if len(got) != 2 || got[0].ID != running[0] || got[1].ID != running[1] {
				t.Fatalf("%s claim over a paused and a running queue returned %v; want only the running queue's %v", mode, ids(got), running)
			}
			f.claimNothing("the queue is paused")
			for _, id := range paused {
				f.wantState(id, backend.StatePending, "a paused queue's jobs wait")
			}
		})
	}

	t.Run("EnqueueAndPromoteGoOn", func(t *testing.T) {
		f := start(t, factory)
		f.pause(f.queue, true)
		pending := f.enqueueOne(backend.NewJob{})
		f.wantState(pending, backend.StatePending, "enqueue into a paused queue goes on")
		scheduled := f.enqueueOne(backend.NewJob{RunAt: f.now.Add(time.Minute)})
		f.advance(time.Minute)
		f.wantResult("Promote in a paused queue", f.promote(), backend.MaintenanceResult{Moved: 1})
		f.wantState(scheduled, backend.StatePending, "promotion goes on in a paused queue")
		f.claimNothing("the queue is paused")
		f.pause(f.queue, false)
		if got := f.claim(10); len(got) != 2 {
			t.Fatalf("after resuming, Claim returned %d jobs; want both", len(got))
		}
	})

	t.Run("ActiveJobsFinish", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueN(3)
		jobs := f.claim(3)
		if len(jobs) != 3 {
			t.Fatalf("Claim(max 3) returned %d jobs", len(jobs))
		}
		f.pause(f.queue, true)
		f.advance(time.Second)
		if st := f.heartbeat(lease(jobs[0]), testLease); st.Lost {
			t.Fatalf("Heartbeat in a paused queue reported the lease lost")
		}
		f.mustOK("Complete in a paused queue", f.complete(lease(jobs[0]), nil))
		f.mustOK("Fail in a paused queue", f.fail(backend.FailItem{Lease: lease(jobs[1]), Message: "again", RetryAt: f.now}))
		f.mustOK("Release in a paused queue", f.release(lease(jobs[2])))
		f.wantState(jobs[0].ID, backend.StateCompleted, "active jobs finish in a paused queue")
		f.wantState(jobs[1].ID, backend.StatePending, "a failed attempt with a retry now goes back to pending")
		f.wantState(jobs[2].ID, backend.StatePending, "a released job goes back to pending")
		f.claimNothing("the queue is paused")
	})

	t.Run("ResumeSignals", func(t *testing.T) {
		f := start(t, factory)
		f.pause(f.queue, true)
		id := f.enqueueOne(backend.NewJob{})
		sub := f.subscribe(f.queue)
		f.pause(f.queue, false)
		f.wantSignal(sub, "resuming a paused queue that holds a pending job")
		f.claimID(id, "the queue runs again")
	})

	t.Run("SettingsPersist", func(t *testing.T) {
		f := start(t, factory)
		if qs := f.settings(f.queue); qs != (backend.QueueSettings{}) {
			t.Fatalf("settings of a queue never configured = %+v; want the zero value", qs)
		}
		f.pause(f.queue, true)
		r := backend.QueueRetention{Completed: backend.RetainNone, Failed: backend.RetainFor(time.Hour), Cancelled: backend.RetainForever}
		want := backend.QueueSettings{Paused: true, Retention: r}
		if qs := f.updateQueue(backend.UpdateQueueParams{Retention: &r}); qs != want {
			t.Fatalf("UpdateQueue(Retention) returned %+v; want %+v (Paused kept)", qs, want)
		}
		if qs := f.settings(f.queue); qs != want {
			t.Fatalf("settings read back = %+v; want %+v", qs, want)
		}
		want.Paused = false
		if qs := f.pause(f.queue, false); qs != want {
			t.Fatalf("UpdateQueue(Paused: false) returned %+v; want %+v (Retention kept)", qs, want)
		}
		r2 := backend.QueueRetention{Failed: backend.RetainFor(2 * time.Hour)}
		want.Retention = r2
		if qs := f.updateQueue(backend.UpdateQueueParams{Retention: &r2}); qs != want {
			t.Fatalf("UpdateQueue(Retention) returned %+v; want %+v (the whole override replaced)", qs, want)
		}
		if qs := f.settings(uniqueQueue(t, "-other")); qs != (backend.QueueSettings{}) {
			t.Fatalf("settings of another queue = %+v; want the zero value", qs)
		}
	})

	t.Run("Checks", func(t *testing.T) {
		f := start(t, factory)
		f.pause(f.queue, true)
		yes := false
		bad := backend.QueueRetention{Completed: backend.Retention(-3)}
		for _, c := range []struct {
			field string
			p     backend.UpdateQueueParams
		}{
			{"queue", backend.UpdateQueueParams{Queue: "no spaces", Paused: &yes, Now: f.now}},
			{"retention", backend.UpdateQueueParams{Queue: f.queue, Paused: &yes, Retention: &bad, Now: f.now}},
			{"now", backend.UpdateQueueParams{Queue: f.queue, Paused: &yes}},
		} {
			_, err := f.b.UpdateQueue(f.ctx, c.p)
			wantInvalid(t, err, -1, c.field)
		}
		if qs := f.settings(f.queue); !qs.Paused || qs.Retention != (backend.QueueRetention{}) {
			t.Fatalf("settings after refused updates = %+v; want paused, default retention", qs)
		}
	})
}
