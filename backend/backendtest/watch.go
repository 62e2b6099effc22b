package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// watch opens a WatchFinished subscription for ids and closes it with the test.
func (f *fixture) watch(ids ...string) *backend.Subscription {
	f.t.Helper()
	sub, err := f.b.WatchFinished(f.ctx, backend.WatchParams{IDs: ids})
	if errors.Is(err, backend.ErrNotSupported) {
		f.t.Skip("the store cannot signal (WatchFinished: ErrNotSupported); waiters poll")
	}
	if err != nil {
		f.t.Fatalf("WatchFinished(%v): %v", ids, err)
	}
	if sub == nil || sub.C == nil {
		f.t.Fatalf("WatchFinished(%v) returned no channel", ids)
	}
	f.t.Cleanup(sub.Close)
	return sub
}

func testWatch(t *testing.T, factory Factory) {
	// Each case prepares a job, then returns its id and the step that makes
	// it final or deletes it; the watch opens between the two, so signals
	// of the preparation (which may come: they coalesce) stay out of it.
	cases := []struct {
		name    string
		prepare func(f *fixture) (string, func())
	}{
		{"Complete", func(f *fixture) (string, func()) {
			id := f.enqueueOne(backend.NewJob{})
			j := f.claimOne()
			return id, func() { f.mustOK("Complete", f.complete(lease(j), []byte("done"))) }
		}},
		{"FailFinal", func(f *fixture) (string, func()) {
			id := f.enqueueOne(backend.NewJob{})
			j := f.claimOne()
			return id, func() { f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "boom", Final: true})) }
		}},
		{"FailLastAttempt", func(f *fixture) (string, func()) {
			id := f.enqueueOne(backend.NewJob{MaxAttempts: 1})
			j := f.claimOne()
			return id, func() { f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "boom", RetryAt: f.now})) }
		}},
		{"FailHandlerCancel", func(f *fixture) (string, func()) {
			id := f.enqueueOne(backend.NewJob{})
			j := f.claimOne()
			return id, func() { f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "stop", Cancel: true})) }
		}},
		{"CancelPending", func(f *fixture) (string, func()) {
			id := f.enqueueOne(backend.NewJob{})
			return id, func() { f.mustCancel(id) }
		}},
		{"CancelScheduled", func(f *fixture) (string, func()) {
			id := f.enqueueOne(backend.NewJob{RunAt: f.now.Add(time.Hour)})
			return id, func() { f.mustCancel(id) }
		}},
		{"CancelledActiveCompletes", func(f *fixture) (string, func()) {
			id := f.enqueueOne(backend.NewJob{})
			j := f.claimOne()
			f.mustCancel(id)
			return id, func() { f.mustOK("Complete", f.complete(lease(j), nil)) }
		}},
		{"CancelledActiveReleased", func(f *fixture) (string, func()) {
			id := f.enqueueOne(backend.NewJob{})
			j := f.claimOne()
			f.mustCancel(id)
			return id, func() { f.mustOK("Release", f.release(lease(j))) }
		}},
		{"DeadlineByPromote", func(f *fixture) (string, func()) {
			id := f.enqueueOne(backend.NewJob{RunAt: f.now.Add(time.Minute), Deadline: f.now.Add(2 * time.Minute)})
			return id, func() { f.advance(2 * time.Minute); f.promote() }
		}},
		{"DeadlineByClaim", func(f *fixture) (string, func()) {
			id := f.enqueueOne(backend.NewJob{Deadline: f.now.Add(time.Minute)})
			return id, func() { f.advance(time.Minute); f.claimNothing("the job's deadline passed") }
		}},
		{"LeaseRecoveryToFailed", func(f *fixture) (string, func()) {
			id := f.enqueueOne(backend.NewJob{MaxAttempts: 1})
			j := f.claimOne()
			return id, func() { f.now = j.LeaseExpiresAt; f.recoverLeases() }
		}},
		{"LeaseRecoveryOfCancelled", func(f *fixture) (string, func()) {
			id := f.enqueueOne(backend.NewJob{})
			j := f.claimOne()
			f.mustCancel(id)
			return id, func() { f.now = j.LeaseExpiresAt; f.recoverLeases() }
		}},
		{"RetainNone", func(f *fixture) (string, func()) {
			id := f.enqueueOne(backend.NewJob{Retention: backend.RetainNone})
			j := f.claimOne()
			return id, func() { f.mustOK("Complete", f.complete(lease(j), nil)); f.wantGone(id, "RetainNone") }
		}},
		{"Delete", func(f *fixture) (string, func()) {
			id := f.enqueueOne(backend.NewJob{})
			return id, func() { f.mustOK("Delete", f.b.Delete(f.ctx, backend.DeleteParams{ID: id, Now: f.now})) }
		}},
		{"DeleteFinal", func(f *fixture) (string, func()) {
			id := f.finish(backend.RetainForever, backend.StateCompleted)
			return id, func() { f.mustOK("Delete", f.b.Delete(f.ctx, backend.DeleteParams{ID: id, Now: f.now})) }
		}},
		{"Purge", func(f *fixture) (string, func()) {
			id := f.enqueueOne(backend.NewJob{})
			return id, func() {
				if n := f.purge(f.queue, backend.StatePending, 10); n != 1 {
					f.t.Fatalf("Purge deleted %d jobs; want 1", n)
				}
			}
		}},
		{"Retention", func(f *fixture) (string, func()) {
			id := f.finish(backend.RetainFor(time.Hour), backend.StateCompleted)
			return id, func() {
				f.advance(time.Hour)
				f.wantResult("ApplyRetention", f.applyRetention(), backend.MaintenanceResult{Moved: 1})
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := start(t, factory)
			id, act := c.prepare(f)
			sub := f.watch(id)
			act()
			f.wantSignal(sub, c.name+" ended the watched job")
			if j, err := f.b.Get(f.ctx, backend.GetParams{ID: id}); err == nil && !j.State.Final() {
				t.Fatalf("after %s the watched job is %q; want final or gone", c.name, j.State)
			}
		})
	}

	t.Run("OneOfMany", func(t *testing.T) {
		f := start(t, factory)
		ids := f.enqueueN(3)
		sub := f.watch(ids[0], ids[2], f.unknownID())
		f.mustCancel(ids[2])
		f.wantSignal(sub, "the last of three watched ids was cancelled")
	})

	t.Run("TwoWatchers", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{})
		a, b := f.watch(id), f.watch(id)
		f.mustCancel(id)
		f.wantSignal(a, "the watched job was cancelled (first watcher)")
		f.wantSignal(b, "the watched job was cancelled (second watcher)")
	})

	t.Run("CloseTwice", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{})
		sub := f.watch(id)
		sub.Close()
		sub.Close()
		// Ending the job a closed watch named must go on as usual.
		f.mustCancel(id)
		f.wantCancelled(id, backend.CancelReasonRequested, "a closed watch changes nothing")
	})
}
