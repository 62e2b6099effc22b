package backendtest

import (
	"testing"

	"github.com/kyuhq/kyu/backend"
)

// testNowChecks proves that every method that takes the caller's clock
// refuses a call without it (a *ValidationError on "now") and changes
// nothing, and that Subscribe refuses an illegal queue name: the checks
// backend.Checked runs in front of every store.
func testNowChecks(t *testing.T, factory Factory) {
	t.Run("ZeroNow", func(t *testing.T) { testZeroNow(t, factory) })
	t.Run("SubscribeQueueName", func(t *testing.T) {
		f := start(t, factory)
		_, err := f.b.Subscribe(f.ctx, backend.SubscribeParams{Queues: []string{"no spaces"}})
		wantInvalid(t, err, -1, "queues")
	})
}

// testZeroNow calls each method without a Now on a store holding one
// active job.
func testZeroNow(t *testing.T, factory Factory) {
	f := start(t, factory)
	f.enqueueOne(backend.NewJob{})
	j := f.claimOne()
	before := f.get(j.ID)
	l := []backend.Lease{lease(j)}
	calls := map[string]func() error{
		"Claim": func() error {
			_, err := f.b.Claim(f.ctx, backend.ClaimParams{Queues: []string{f.queue}, Max: 1, Lease: testLease})
			return err
		},
		"Heartbeat": func() error {
			_, err := f.b.Heartbeat(f.ctx, backend.HeartbeatParams{Leases: l, Extend: testLease})
			return err
		},
		"Complete": func() error {
			_, err := f.b.Complete(f.ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: l[0]}}})
			return err
		},
		"Fail": func() error {
			_, err := f.b.Fail(f.ctx, backend.FailParams{Items: []backend.FailItem{{Lease: l[0], Message: "x"}}})
			return err
		},
		"Release": func() error {
			_, err := f.b.Release(f.ctx, backend.ReleaseParams{Leases: l})
			return err
		},
		"Report": func() error {
			_, err := f.b.Report(f.ctx, backend.ReportParams{Items: []backend.ReportItem{{Lease: l[0], Logs: []string{"x"}}}})
			return err
		},
		"Cancel": func() error {
			_, err := f.b.Cancel(f.ctx, backend.CancelParams{ID: j.ID})
			return err
		},
		"Retry": func() error {
			_, err := f.b.Retry(f.ctx, backend.RetryParams{ID: j.ID})
			return err
		},
		"RunNow": func() error {
			_, err := f.b.RunNow(f.ctx, backend.RunNowParams{ID: j.ID})
			return err
		},
		"Delete": func() error { return f.b.Delete(f.ctx, backend.DeleteParams{ID: j.ID}) },
		"Promote": func() error {
			_, err := f.b.Promote(f.ctx, backend.MaintenanceParams{})
			return err
		},
		"RecoverLeases": func() error {
			_, err := f.b.RecoverLeases(f.ctx, backend.MaintenanceParams{})
			return err
		},
		"ApplyRetention": func() error {
			_, err := f.b.ApplyRetention(f.ctx, backend.MaintenanceParams{})
			return err
		},
		"Stats": func() error {
			_, err := f.b.Stats(f.ctx, backend.StatsParams{})
			return err
		},
		"Workers": func() error {
			_, err := f.b.Workers(f.ctx, backend.WorkersParams{})
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			wantInvalid(t, call(), -1, "now")
		})
	}
	f.unchanged(before, "calls without the caller's clock change nothing")
}
