package backendtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// stats reads the statistics at f.now with minutes of history.
func (f *fixture) stats(minutes int) backend.Stats {
	f.t.Helper()
	st, err := f.b.Stats(f.ctx, backend.StatsParams{Now: f.now, Minutes: minutes})
	if err != nil {
		f.t.Fatalf("Stats(minutes %d) at %s: %v", minutes, stamp(f.now), err)
	}
	return st
}

// queueInfo finds queue in st, failing the test when it is not listed.
func (f *fixture) queueInfo(st backend.Stats, queue string) backend.QueueInfo {
	f.t.Helper()
	for i, q := range st.Queues {
		if i > 0 && st.Queues[i-1].Name >= q.Name {
			f.t.Fatalf("Stats lists queue %q after %q; want queues by name, each once", q.Name, st.Queues[i-1].Name)
		}
		if q.Name == queue {
			return q
		}
	}
	f.t.Fatalf("Stats does not list queue %s", queue)
	return backend.QueueInfo{}
}

// wantCounts checks a queue's counts against want (states not named are
// zero), that every state is present, and that each count agrees with List.
func (f *fixture) wantCounts(queue string, want map[backend.State]int64, why string) {
	f.t.Helper()
	info := f.queueInfo(f.stats(0), queue)
	for _, s := range backend.States() {
		got, ok := info.Counts[s]
		if !ok {
			f.t.Fatalf("Stats counts of %s have no %q entry; want every state present", queue, s)
		}
		if got != want[s] {
			f.t.Fatalf("Stats counts %d %s jobs in %s; want %d: %s", got, s, queue, want[s], why)
		}
		if listed := len(f.listIDs(backend.ListParams{Queue: queue, State: s, Limit: backend.MaxListLimit}, nil)); int64(listed) != got {
			f.t.Fatalf("Stats counts %d %s jobs in %s, List shows %d; want them to agree", got, s, queue, listed)
		}
	}
	if len(info.Counts) != len(backend.States()) {
		f.t.Fatalf("Stats counts of %s have %d entries; want one per state", queue, len(info.Counts))
	}
}

// wantMinutes checks the per-minute counters of st: one entry per minute
// ending with the minute of f.now, with the counts given by offset from
// the first minute.
func (f *fixture) wantMinutes(st backend.Stats, n int, counts map[int][2]int64) {
	f.t.Helper()
	if len(st.Minutes) != n {
		f.t.Fatalf("Stats(minutes %d) at %s returned %d minutes", n, stamp(f.now), len(st.Minutes))
	}
	first := backend.MinuteOf(f.now).Add(-time.Duration(n-1) * time.Minute)
	for i, m := range st.Minutes {
		f.wantTime(fmt.Sprintf("Minutes[%d].Minute", i), m.Minute, first.Add(time.Duration(i)*time.Minute))
		if want := counts[i]; m.Processed != want[0] || m.Failed != want[1] {
			f.t.Fatalf("minute %s counts processed %d, failed %d; want %d, %d", stamp(m.Minute), m.Processed, m.Failed, want[0], want[1])
		}
	}
}

func testStats(t *testing.T, factory Factory) {
	t.Run("Counts", func(t *testing.T) {
		f := start(t, factory)
		other := uniqueQueue(t, "-other")
		f.finish(backend.RetainForever, backend.StateCompleted)
		f.finish(backend.RetainForever, backend.StateFailed)
		f.finish(backend.RetainForever, backend.StateFailed)
		f.finish(backend.RetainForever, backend.StateCancelled)
		f.waiting(backend.StateRetry, backend.NewJob{})
		active := f.enqueueOne(backend.NewJob{})
		j := f.claimID(active, "the only pending job")
		pending := f.enqueueN(3)
		due := f.enqueueOne(backend.NewJob{RunAt: f.now.Add(time.Second)})
		f.enqueueOne(backend.NewJob{RunAt: f.now.Add(time.Hour)})
		f.enqueueOne(backend.NewJob{Queue: other})
		f.advance(time.Second)
		f.wantCounts(f.queue, map[backend.State]int64{
			backend.StateCompleted: 1, backend.StateFailed: 2, backend.StateCancelled: 1, backend.StateRetry: 1,
			backend.StateActive: 1, backend.StatePending: 3, backend.StateScheduled: 2,
		}, "one job of each kind was made (the due scheduled job is not promoted yet)")
		f.wantCounts(other, map[backend.State]int64{backend.StatePending: 1}, "the other queue holds one pending job")

		f.promote()
		f.mustOK("Complete", f.complete(lease(j), nil))
		f.mustOK("Delete", f.b.Delete(f.ctx, backend.DeleteParams{ID: pending[0], Now: f.now}))
		f.mustCancel(due)
		f.wantCounts(f.queue, map[backend.State]int64{
			backend.StateCompleted: 2, backend.StateFailed: 2, backend.StateCancelled: 2, backend.StateRetry: 1,
			backend.StatePending: 2, backend.StateScheduled: 1,
		}, "after a promotion, a completion, a deletion and a cancel")
		if n := f.purge(f.queue, backend.StateFailed, 10); n != 2 {
			t.Fatalf("Purge of 2 failed jobs deleted %d", n)
		}
		claimed := f.claim(2)
		f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(claimed[0]), Message: "boom", RetryAt: f.now.Add(time.Minute)}))
		f.wantCounts(f.queue, map[backend.State]int64{
			backend.StateCompleted: 2, backend.StateCancelled: 2, backend.StateRetry: 2,
			backend.StateActive: 1, backend.StateScheduled: 1,
		}, "after a purge, two claims and a failure")
	})

	t.Run("RetainNone", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueN(1)
		id := f.enqueueOne(backend.NewJob{Retention: backend.RetainNone})
		f.claim(2)
		f.wantCounts(f.queue, map[backend.State]int64{backend.StateActive: 2}, "both jobs are active")
		f.mustCancel(id)
		j := f.get(id)
		f.mustOK("Complete", f.complete(lease(j), nil))
		f.wantCounts(f.queue, map[backend.State]int64{backend.StateActive: 1}, "the RetainNone job was deleted as it ended")
	})

	t.Run("Settings", func(t *testing.T) {
		f := start(t, factory)
		idle := uniqueQueue(t, "-idle")
		r := backend.QueueRetention{Failed: backend.RetainForever}
		paused := true
		want := f.updateQueue(backend.UpdateQueueParams{Queue: idle, Paused: &paused, Retention: &r})
		f.enqueueN(1)
		st := f.stats(0)
		info := f.queueInfo(st, idle)
		if info.Settings != want {
			t.Fatalf("Stats shows settings %+v for %s; want %+v", info.Settings, idle, want)
		}
		if info.Counts == nil || len(info.Counts) != len(backend.States()) {
			t.Fatalf("Stats counts of a queue without jobs = %v; want every state at zero", info.Counts)
		}
		if got := f.queueInfo(st, f.queue).Settings; got != (backend.QueueSettings{}) {
			t.Fatalf("Stats shows settings %+v for a queue never configured; want the zero value", got)
		}
	})

	t.Run("OldestPendingByRunAt", func(t *testing.T) {
		f := start(t, factory)
		// early has the older id, late the earlier RunAt.
		early := f.enqueueOne(backend.NewJob{RunAt: t0.Add(2 * time.Second)})
		f.at(time.Second)
		late := f.enqueueOne(backend.NewJob{})
		f.wantTime("OldestPending with one pending job", f.queueInfo(f.stats(0), f.queue).OldestPending, t0.Add(time.Second))
		f.at(3 * time.Second)
		f.promote()
		f.wantTime("OldestPending (earliest RunAt, not oldest job)", f.queueInfo(f.stats(0), f.queue).OldestPending, t0.Add(time.Second))
		f.claimID(late, "the earlier RunAt")
		f.wantTime("OldestPending after the oldest was claimed", f.queueInfo(f.stats(0), f.queue).OldestPending, t0.Add(2*time.Second))
		f.claimID(early, "the last one")
		f.wantTime("OldestPending with nothing pending", f.queueInfo(f.stats(0), f.queue).OldestPending, time.Time{})
	})

	t.Run("Minutes", func(t *testing.T) {
		f := start(t, factory)
		f.at(30 * time.Second)
		st := f.stats(3)
		f.wantMinutes(st, 3, nil)
		if st.Processed != 0 || st.Failed != 0 {
			t.Fatalf("totals of a fresh store = %d, %d; want 0, 0", st.Processed, st.Failed)
		}
		f.at(0)
		ids := f.enqueueN(5)
		p := f.claimParams(5)
		p.Lease = 130 * time.Second
		jobs := f.claimWith(p)
		if len(jobs) != 5 {
			t.Fatalf("Claim(max 5) returned %d jobs", len(jobs))
		}
		f.at(10 * time.Second) // minute 0
		f.mustOK("Complete", f.complete(lease(jobs[0]), nil))
		f.at(70 * time.Second) // minute 1
		f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(jobs[1]), Message: "retry", RetryAt: f.now.Add(time.Hour)}))
		f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(jobs[2]), Message: "final", Final: true}))
		f.at(125 * time.Second) // minute 2
		f.mustOK("Release", f.release(lease(jobs[4])))
		f.at(130 * time.Second)
		f.wantResult("RecoverLeases", f.recoverLeases(), backend.MaintenanceResult{Moved: 1})
		f.wantState(ids[3], backend.StatePending, "its lease was recovered")

		f.at(150 * time.Second)
		st = f.stats(3)
		f.wantMinutes(st, 3, map[int][2]int64{0: {1, 0}, 1: {2, 2}, 2: {1, 1}})
		if st.Processed != 4 || st.Failed != 3 {
			t.Fatalf("totals = processed %d, failed %d; want 4, 3 (Release counts in neither)", st.Processed, st.Failed)
		}
		f.wantMinutes(f.stats(2), 2, map[int][2]int64{0: {2, 2}, 1: {1, 1}})
		if st := f.stats(0); len(st.Minutes) != 0 || st.Processed != 4 {
			t.Fatalf("Stats(minutes 0) = %d minutes, processed %d; want none and 4", len(st.Minutes), st.Processed)
		}
		f.at(3*time.Minute + 59*time.Second)
		f.wantMinutes(f.stats(4), 4, map[int][2]int64{0: {1, 0}, 1: {2, 2}, 2: {1, 1}})
		f.at(time.Hour)
		st = f.stats(5)
		f.wantMinutes(st, 5, nil)
		if st.Processed != 4 || st.Failed != 3 {
			t.Fatalf("totals an hour on = %d, %d; want 4, 3 (totals never drop)", st.Processed, st.Failed)
		}
		f.at(48 * time.Hour)
		f.applyRetention()
		if st := f.stats(int(backend.StatsHistory / time.Minute)); st.Processed != 4 || st.Failed != 3 || len(st.Minutes) != 1440 {
			t.Fatalf("two days on, after ApplyRetention: totals %d, %d, %d minutes; want 4, 3 and 1440", st.Processed, st.Failed, len(st.Minutes))
		}
	})

	t.Run("CancelledAttempts", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueN(3)
		jobs := f.claim(3)
		if len(jobs) != 3 {
			t.Fatalf("Claim(max 3) returned %d jobs", len(jobs))
		}
		f.mustCancel(jobs[0].ID)
		f.mustCancel(jobs[1].ID)
		f.mustOK("Complete of a job whose cancel was requested", f.complete(lease(jobs[0]), nil))
		f.mustOK("Fail of a job whose cancel was requested", f.fail(backend.FailItem{Lease: lease(jobs[1]), Message: "boom"}))
		f.mustOK("Fail with Cancel", f.fail(backend.FailItem{Lease: lease(jobs[2]), Message: "stop", Cancel: true}))
		// Each Complete and each Fail counts, whatever comes of the job.
		f.wantMinutes(f.stats(1), 1, map[int][2]int64{0: {3, 2}})
	})

	t.Run("MinutesAcrossQueues", func(t *testing.T) {
		f := start(t, factory)
		other := uniqueQueue(t, "-other")
		f.enqueueOne(backend.NewJob{})
		f.enqueueOne(backend.NewJob{Queue: other})
		p := f.claimParams(2)
		p.Queues = []string{f.queue, other}
		for _, j := range f.claimWith(p) {
			f.mustOK("Complete", f.complete(lease(j), nil))
		}
		f.wantMinutes(f.stats(1), 1, map[int][2]int64{0: {2, 0}})
	})

	t.Run("QueueRates", func(t *testing.T) {
		f := start(t, factory)
		other := uniqueQueue(t, "-other")
		rates := func(queue string) (five, hour backend.AttemptCount) {
			f.t.Helper()
			qi := f.queueInfo(f.stats(0), queue)
			return qi.LastFiveMinutes, qi.LastHour
		}
		want := func(queue string, five, hour backend.AttemptCount, why string) {
			t.Helper()
			if g5, gh := rates(queue); g5 != five || gh != hour {
				t.Fatalf("at %s queue %s counts last 5 min %+v, last hour %+v; want %+v, %+v: %s", stamp(f.now), queue, g5, gh, five, hour, why)
			}
		}
		f.enqueueN(4)
		f.enqueueOne(backend.NewJob{Queue: other})
		want(f.queue, backend.AttemptCount{}, backend.AttemptCount{}, "nothing ended yet")
		p := f.claimParams(5)
		p.Queues = []string{f.queue, other}
		p.Lease = 20 * time.Minute
		jobs := f.claimWith(p)
		if len(jobs) != 5 {
			t.Fatalf("Claim(max 5) returned %d jobs", len(jobs))
		}
		f.at(10 * time.Second) // minute 0
		f.mustOK("Complete", f.complete(lease(jobs[0]), nil))
		f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(jobs[1]), Message: "retry", RetryAt: f.now.Add(time.Hour)}))
		f.mustOK("Complete", f.complete(lease(jobs[4]), nil)) // the other queue
		f.at(6 * time.Minute)                                 // minute 6
		f.mustOK("Release", f.release(lease(jobs[2])))
		f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(jobs[3]), Message: "final", Final: true}))
		want(f.queue, backend.AttemptCount{Processed: 1, Failed: 1}, backend.AttemptCount{Processed: 3, Failed: 2},
			"minute 0 is out of the last 5 minutes, in the last hour; Release counts in neither")
		want(other, backend.AttemptCount{}, backend.AttemptCount{Processed: 1}, "the other queue counts its own")
		f.at(20*time.Minute + 59*time.Second)
		f.claimID(jobs[2].ID, "the released job")
		f.at(40*time.Minute + 59*time.Second)
		f.wantResult("RecoverLeases", f.recoverLeases(), backend.MaintenanceResult{Moved: 1})
		want(f.queue, backend.AttemptCount{Processed: 1, Failed: 1}, backend.AttemptCount{Processed: 4, Failed: 3}, "a recovered lease counts failed")
		f.at(time.Hour - time.Second) // minute 59: minute 0 is the hour's first
		want(f.queue, backend.AttemptCount{}, backend.AttemptCount{Processed: 4, Failed: 3}, "minute 0 is still within the hour")
		f.at(time.Hour) // minute 60
		want(f.queue, backend.AttemptCount{}, backend.AttemptCount{Processed: 2, Failed: 2}, "minute 0 left the hour")
		f.applyRetention()
		want(f.queue, backend.AttemptCount{}, backend.AttemptCount{Processed: 2, Failed: 2}, "ApplyRetention keeps the last hour")
		f.at(2 * time.Hour)
		f.applyRetention()
		want(f.queue, backend.AttemptCount{}, backend.AttemptCount{}, "nothing ended in the last hour")
		if st := f.stats(0); st.Processed != 5 || st.Failed != 3 {
			t.Fatalf("totals = %d, %d; want 5, 3", st.Processed, st.Failed)
		}
	})

	t.Run("Checks", func(t *testing.T) {
		f := start(t, factory)
		for _, c := range []struct {
			field string
			p     backend.StatsParams
		}{
			{"minutes", backend.StatsParams{Now: f.now, Minutes: -1}},
			{"minutes", backend.StatsParams{Now: f.now, Minutes: int(backend.StatsHistory/time.Minute) + 1}},
			{"now", backend.StatsParams{}},
		} {
			_, err := f.b.Stats(f.ctx, c.p)
			wantInvalid(t, err, -1, c.field)
		}
	})
}
