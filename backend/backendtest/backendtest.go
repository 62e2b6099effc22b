// Package backendtest is the conformance suite for kyu stores. Every
// backend.Backend runs it from a short test of its own:
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, func(t *testing.T) backend.Backend {
//			b, err := pebble.Open(t.TempDir(), pebble.Options{})
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { b.Close() })
//			return b
//		})
//	}
//
// Each subtest proves one promise of the "Settled semantics" in the package
// doc of backend, on a fresh store of its own, in parallel with the others.
//
// What the suite asks of a store beyond the contract:
//
//   - Time is only what the caller passes. The suite runs on a fixed
//     timeline starting at 2030-01-01T00:00:00Z and moves it by arithmetic;
//     it never sleeps and never reads the wall clock for semantics.
//   - Times are kept to at least millisecond precision. The suite uses only
//     whole milliseconds and compares times after truncating to the
//     millisecond, so a store keeping ms or µs is fine; durations (Timeout,
//     UniqueFor, Retention) are whole seconds.
//   - Ids are non-empty, distinct strings; nothing else about them is
//     assumed, except that an id made by backend.NewID and never enqueued
//     names no job.
//   - The factory returns a fresh, empty store per call and registers its own
//     cleanup (which closes it; the suite may have closed it already, so
//     Close must tolerate a second call). Stores must not share state
//     between factory calls, since subtests run in parallel.
//
// Where the contract leaves a choice open, the suite holds these readings
// (and tests nothing beyond them):
//
//   - MaintenanceResult.Moved of RecoverLeases counts every recovered job,
//     those sent to failed included (Failed is a subset of Moved); Promote's
//     Moved does not count jobs it cancelled by deadline.
//   - ApplyRetention's Moved counts deleted jobs, not forgotten unique keys.
//   - An AttemptError records the attempt number the attempt ran as, also
//     for an interrupted attempt whose Attempt Release then decrements.
//   - A Subscription hears every event that happens after Subscribe returns.
//   - Cancel, Retry and RunNow return the job as it is after the call (not
//     checked for a job Cancel deleted under RetainNone). A second Cancel
//     of an active job already requested returns no error.
//   - Retry keeps the job's attempt errors: RetryParams clears only what it
//     names.
//   - Subscribe and WatchFinished are checked only on a store that offers
//     them: one that returns ErrNotSupported skips those tests.
//   - A page that ends with the last matching job has no NextCursor, and
//     a cursor stays valid when only Limit changes.
//   - Stats lists a queue that has settings and no jobs.
//
// The in-memory store of backend/memory is the suite's reference: a plain
// reading of the contract that passes it (its TestConformance), so a failure
// on a real store can be compared with it.
package backendtest

import (
	"testing"

	"github.com/kyuhq/kyu/backend"
)

// Factory returns a fresh, empty store and registers its own cleanup.
type Factory func(t *testing.T) backend.Backend

// Run proves that the stores made by factory keep the contract.
func Run(t *testing.T, factory Factory) {
	t.Helper()
	areas := []struct {
		name string
		run  func(t *testing.T, factory Factory)
	}{
		{"Enqueue", testEnqueue},
		{"Validation", testValidation},
		{"ParamChecks", testParamChecks},
		{"NowChecks", testNowChecks},
		{"Order", testOrder},
		{"Queues", testQueues},
		{"Claim", testClaim},
		{"ClaimBudget", testClaimBudget},
		{"ClaimTypes", testClaimTypes},
		{"Fencing", testFencing},
		{"Heartbeat", testHeartbeat},
		{"LeaseExpiry", testLeaseExpiry},
		{"Retry", testRetry},
		{"Release", testRelease},
		{"Unique", testUnique},
		{"JID", testJID},
		{"Deadline", testDeadline},
		{"Retention", testRetention},
		{"Complete", testComplete},
		{"Delete", testDelete},
		{"Maintenance", testMaintenance},
		{"Leader", testLeader},
		{"Subscribe", testSubscribe},
		{"Cancel", testCancel},
		{"Admin", testAdmin},
		{"Pause", testPause},
		{"QueueRetention", testQueueRetention},
		{"Report", testReport},
		{"Watch", testWatch},
		{"List", testList},
		{"Stats", testStats},
		{"Workers", testWorkers},
		{"Periodic", testPeriodic},
		{"Import", testImport},
		{"Close", testClose},
	}
	for _, a := range areas {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			a.run(t, factory)
		})
	}
}
