package backendtest

import (
	"slices"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// retry asks the store to retry id at f.now.
func (f *fixture) retry(id string) (*backend.Job, error) {
	f.t.Helper()
	return f.b.Retry(f.ctx, backend.RetryParams{ID: id, Now: f.now})
}

// runNow asks the store to run id at f.now.
func (f *fixture) runNow(id string) (*backend.Job, error) {
	f.t.Helper()
	return f.b.RunNow(f.ctx, backend.RunNowParams{ID: id, Now: f.now})
}

// mustRetry retries id at f.now and checks that it is pending now.
func (f *fixture) mustRetry(id string) *backend.Job {
	f.t.Helper()
	j, err := f.retry(id)
	if err != nil {
		f.t.Fatalf("Retry(%s) at %s: %v", id, stamp(f.now), err)
	}
	if j == nil || j.ID != id || j.State != backend.StatePending {
		f.t.Fatalf("Retry(%s) returned %v; want the job, pending", id, j)
	}
	return f.wantRetried(id)
}

// wantRetried checks the fields a retry at f.now sets and clears.
func (f *fixture) wantRetried(id string) *backend.Job {
	f.t.Helper()
	j := f.wantState(id, backend.StatePending, "a retried job is pending")
	f.wantTime("RunAt of a retried job", j.RunAt, f.now)
	f.wantTime("FinishedAt of a retried job", j.FinishedAt, time.Time{})
	f.wantTime("ExpiresAt of a retried job", j.ExpiresAt, time.Time{})
	if len(j.Result) != 0 || j.CancelReason != "" || j.CancelRequested {
		f.t.Fatalf("retried job keeps Result %q, CancelReason %q, CancelRequested %v; want all cleared", j.Result, j.CancelReason, j.CancelRequested)
	}
	if j.MaxAttempts <= j.Attempt {
		f.t.Fatalf("retried job has Attempt %d of MaxAttempts %d; want at least one more try", j.Attempt, j.MaxAttempts)
	}
	return j
}

// failedJobs makes n failed jobs in f.queue (or queue, when given), failed
// in the reverse of their enqueue order so that finishing order and id
// order differ; it returns their ids in enqueue order.
func (f *fixture) failedJobs(n int, queue string) []string {
	f.t.Helper()
	batch := make([]backend.NewJob, n)
	for i := range batch {
		batch[i] = backend.NewJob{Queue: queue, MaxAttempts: 1, Retention: backend.RetainForever}
	}
	var ids []string
	for _, r := range f.enqueue(batch...) {
		ids = append(ids, r.ID)
	}
	p := f.claimParams(n)
	p.Queues = []string{f.fill(backend.NewJob{Queue: queue}).Queue}
	jobs := f.claimWith(p)
	if len(jobs) != n {
		f.t.Fatalf("claim of %d jobs to fail returned %d", n, len(jobs))
	}
	slices.Reverse(jobs)
	for _, j := range jobs {
		f.advance(time.Millisecond)
		f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "boom"}))
	}
	for _, id := range ids {
		f.wantState(id, backend.StateFailed, "its only attempt failed")
	}
	return ids
}

// retryQueue runs RetryQueue at f.now and fails the test on error.
func (f *fixture) retryQueue(queue string, state backend.State, limit int) int {
	f.t.Helper()
	res, err := f.b.RetryQueue(f.ctx, backend.RetryQueueParams{Queue: queue, State: state, Limit: limit, Now: f.now})
	if err != nil {
		f.t.Fatalf("RetryQueue(%s, %s, limit %d): %v", queue, state, limit, err)
	}
	return res.Count
}

// purge runs Purge at f.now and fails the test on error.
func (f *fixture) purge(queue string, state backend.State, limit int) int {
	f.t.Helper()
	res, err := f.b.Purge(f.ctx, backend.PurgeParams{Queue: queue, State: state, Limit: limit, Now: f.now})
	if err != nil {
		f.t.Fatalf("Purge(%s, %s, limit %d): %v", queue, state, limit, err)
	}
	return res.Count
}

func testAdmin(t *testing.T, factory Factory) {
	t.Run("RetryFailed", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{MaxAttempts: 2, UniqueKey: "k", Deadline: f.now.Add(time.Hour), Retention: backend.RetainForever})
		for range 2 {
			j := f.claimID(id, "the only job")
			f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "boom", RetryAt: f.now}))
		}
		failed := f.wantState(id, backend.StateFailed, "both attempts failed")
		f.now = t0.Add(2 * time.Hour)
		j := f.mustRetry(id)
		if j.Attempt != 2 || j.MaxAttempts != 3 {
			t.Fatalf("retried job has Attempt %d, MaxAttempts %d; want 2 (kept) and 3 (raised to Attempt+1)", j.Attempt, j.MaxAttempts)
		}
		if len(j.Errors) != len(failed.Errors) {
			t.Fatalf("retried job has %d attempt errors; want the %d it had (Retry clears only what RetryParams names)", len(j.Errors), len(failed.Errors))
		}
		f.wantTime("Deadline of a job retried after its deadline", j.Deadline, time.Time{})
		f.wantDuplicate(backend.NewJob{UniqueKey: "k"}, id, "Retry takes the job's unique key again")
		again := f.claimID(id, "the retried job is claimable, its passed deadline cleared")
		if again.Attempt != 3 {
			t.Fatalf("claim after Retry gave attempt %d; want 3", again.Attempt)
		}
	})

	t.Run("RetryCancelled", func(t *testing.T) {
		f := start(t, factory)
		deadline := f.now.Add(time.Hour)
		id := f.enqueueOne(backend.NewJob{Deadline: deadline, Retention: backend.RetainForever})
		j := f.claimOne()
		f.mustCancel(id)
		f.mustOK("Complete", f.complete(lease(j), []byte("result")))
		f.wantCancelled(id, backend.CancelReasonRequested, "its cancel was requested")
		f.advance(time.Minute)
		r := f.mustRetry(id)
		if r.Attempt != 1 || r.MaxAttempts != backend.DefaultMaxAttempts {
			t.Fatalf("retried job has Attempt %d, MaxAttempts %d; want 1 and %d (not lowered)", r.Attempt, r.MaxAttempts, backend.DefaultMaxAttempts)
		}
		f.wantTime("Deadline of a job retried before its deadline", r.Deadline, deadline)
		f.claimID(id, "the retried job is claimable")
	})

	t.Run("RetryKeyHeld", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{UniqueKey: "k", MaxAttempts: 1, Retention: backend.RetainForever})
		j := f.claimOne()
		f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "boom"}))
		holder := f.wantFresh(backend.NewJob{UniqueKey: "k"}, "the failed job released its key")
		before := f.get(id)
		_, err := f.retry(id)
		f.mustErr("Retry while another job holds the key", err, backend.ErrUniqueKeyHeld, "the key is held by "+holder)
		f.unchanged(before, "a refused Retry changes nothing")
		h := f.claimID(holder, "the holder")
		f.mustOK("Complete", f.complete(lease(h), nil))
		f.mustRetry(id)
		f.wantDuplicate(backend.NewJob{UniqueKey: "k"}, id, "the retried job took the key again")
	})

	t.Run("RetryWrongState", func(t *testing.T) {
		f := start(t, factory)
		states := map[backend.State]string{
			backend.StateScheduled: f.waiting(backend.StateScheduled, backend.NewJob{}),
			backend.StateRetry:     f.waiting(backend.StateRetry, backend.NewJob{}),
			backend.StateCompleted: f.finish(backend.RetainForever, backend.StateCompleted),
		}
		states[backend.StateActive] = f.enqueueOne(backend.NewJob{})
		f.claimID(states[backend.StateActive], "the only pending job")
		states[backend.StatePending] = f.enqueueOne(backend.NewJob{})
		for s, id := range states {
			before := f.get(id)
			_, err := f.retry(id)
			f.wantStateError("Retry", err, id, s)
			f.unchanged(before, "Retry of a "+string(s)+" job is refused")
		}
		_, err := f.retry(f.unknownID())
		f.mustErr("Retry of an unknown id", err, backend.ErrNotFound, "no job has this id")
		_, err = f.b.Retry(f.ctx, backend.RetryParams{ID: states[backend.StateCompleted]})
		wantInvalid(t, err, -1, "now")
	})

	for _, s := range []backend.State{backend.StateScheduled, backend.StateRetry} {
		t.Run("RunNow/"+string(s), func(t *testing.T) {
			f := start(t, factory)
			id := f.waiting(s, backend.NewJob{})
			before := f.get(id)
			f.advance(time.Second)
			j, err := f.runNow(id)
			if err != nil || j == nil || j.ID != id || j.State != backend.StatePending {
				t.Fatalf("RunNow of a %s job = %v, %v; want the job, pending", s, j, err)
			}
			got := f.wantState(id, backend.StatePending, "RunNow makes the job pending at once")
			f.wantTime("RunAt after RunNow", got.RunAt, f.now)
			if got.Attempt != before.Attempt {
				t.Fatalf("RunNow changed Attempt from %d to %d", before.Attempt, got.Attempt)
			}
			f.claimID(id, "the job runs now, an hour before its RunAt")
		})
	}

	t.Run("RunNowWrongState", func(t *testing.T) {
		f := start(t, factory)
		states := map[backend.State]string{
			backend.StateCompleted: f.finish(backend.RetainForever, backend.StateCompleted),
			backend.StateFailed:    f.finish(backend.RetainForever, backend.StateFailed),
			backend.StateCancelled: f.finish(backend.RetainForever, backend.StateCancelled),
		}
		states[backend.StateActive] = f.enqueueOne(backend.NewJob{})
		f.claimID(states[backend.StateActive], "the only pending job")
		states[backend.StatePending] = f.enqueueOne(backend.NewJob{})
		for s, id := range states {
			before := f.get(id)
			_, err := f.runNow(id)
			f.wantStateError("RunNow", err, id, s)
			f.unchanged(before, "RunNow of a "+string(s)+" job is refused")
		}
		_, err := f.runNow(f.unknownID())
		f.mustErr("RunNow of an unknown id", err, backend.ErrNotFound, "no job has this id")
		_, err = f.b.RunNow(f.ctx, backend.RunNowParams{ID: states[backend.StatePending]})
		wantInvalid(t, err, -1, "now")
	})

	t.Run("RetryQueue", func(t *testing.T) {
		f := start(t, factory)
		other := uniqueQueue(t, "-other")
		failed := f.failedJobs(5, "")
		otherFailed := f.failedJobs(2, other)
		cancelled := []string{f.finish(backend.RetainForever, backend.StateCancelled), f.finish(backend.RetainForever, backend.StateCancelled)}
		f.advance(time.Second)
		for i, want := range []int{3, 2, 0} {
			if got := f.retryQueue(f.queue, backend.StateFailed, 3); got != want {
				t.Fatalf("RetryQueue(failed, limit 3) step %d over 5 failed jobs retried %d; want %d", i+1, got, want)
			}
			if i == 0 {
				for k, id := range failed {
					want := backend.StateFailed
					if k < 3 {
						want = backend.StatePending
					}
					f.wantState(id, want, "RetryQueue retries the oldest (by id) first")
				}
			}
		}
		for _, id := range failed {
			f.wantRetried(id)
		}
		for _, id := range otherFailed {
			f.wantState(id, backend.StateFailed, "RetryQueue touches only its queue")
		}
		for _, id := range cancelled {
			f.wantState(id, backend.StateCancelled, "RetryQueue(failed) touches only failed jobs")
		}
		if got := f.retryQueue(f.queue, backend.StateCancelled, 10); got != 2 {
			t.Fatalf("RetryQueue(cancelled) over 2 cancelled jobs retried %d", got)
		}
		for _, id := range cancelled {
			f.wantRetried(id)
		}
	})

	t.Run("RetryQueueSkipsHeldKey", func(t *testing.T) {
		f := start(t, factory)
		blocked := f.enqueueOne(backend.NewJob{UniqueKey: "k", MaxAttempts: 1, Retention: backend.RetainForever})
		j := f.claimOne()
		f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "boom"}))
		f.wantFresh(backend.NewJob{UniqueKey: "k", RunAt: f.now.Add(time.Hour)}, "the failed job released its key")
		free := f.failedJobs(2, "")
		before := f.get(blocked)
		if got := f.retryQueue(f.queue, backend.StateFailed, 10); got != 2 {
			t.Fatalf("RetryQueue over 3 failed jobs, one whose key is held, retried %d; want 2", got)
		}
		f.unchanged(before, "its unique key is held by another job")
		for _, id := range free {
			f.wantRetried(id)
		}
	})

	t.Run("Purge", func(t *testing.T) {
		f := start(t, factory)
		other := uniqueQueue(t, "-other")
		failed := f.failedJobs(3, "")
		otherFailed := f.failedJobs(1, other)
		pending := f.enqueueN(2)
		scheduled := f.waiting(backend.StateScheduled, backend.NewJob{})
		for i, want := range []int{2, 1, 0} {
			if got := f.purge(f.queue, backend.StateFailed, 2); got != want {
				t.Fatalf("Purge(failed, limit 2) step %d over 3 failed jobs deleted %d; want %d", i+1, got, want)
			}
			if i == 0 {
				f.wantGone(failed[0], "Purge deletes the oldest (by id) first")
				f.wantGone(failed[1], "Purge deletes the oldest (by id) first")
				f.wantState(failed[2], backend.StateFailed, "the limit was 2")
			}
		}
		f.wantGone(failed[2], "the second step deleted it")
		f.wantState(otherFailed[0], backend.StateFailed, "Purge touches only its queue")
		f.wantState(scheduled, backend.StateScheduled, "Purge(failed) touches only failed jobs")
		if got := f.purge(f.queue, backend.StatePending, 10); got != 2 {
			t.Fatalf("Purge(pending) over 2 pending jobs deleted %d", got)
		}
		for _, id := range pending {
			f.wantGone(id, "Purge(pending) deleted it")
		}
		f.claimNothing("purged jobs never run")
		if got := f.purge(f.queue, backend.StateScheduled, 10); got != 1 {
			t.Fatalf("Purge(scheduled) over 1 scheduled job deleted %d", got)
		}
		f.wantGone(scheduled, "Purge(scheduled) deleted it")
	})

	t.Run("PurgeActiveRefused", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		before := f.get(j.ID)
		_, err := f.b.Purge(f.ctx, backend.PurgeParams{Queue: f.queue, State: backend.StateActive, Limit: 10, Now: f.now})
		wantInvalid(t, err, -1, "state")
		f.unchanged(before, "purging active jobs is refused")
		f.mustOK("Complete after a refused Purge", f.complete(lease(j), nil))
	})

	t.Run("BulkChecks", func(t *testing.T) {
		f := start(t, factory)
		failed := f.failedJobs(1, "")
		before := f.get(failed[0])
		bad := []struct {
			field string
			p     backend.RetryQueueParams
		}{
			{"state", backend.RetryQueueParams{Queue: f.queue, State: backend.StatePending, Limit: 1, Now: f.now}},
			{"state", backend.RetryQueueParams{Queue: f.queue, State: backend.StateCompleted, Limit: 1, Now: f.now}},
			{"limit", backend.RetryQueueParams{Queue: f.queue, State: backend.StateFailed, Limit: 0, Now: f.now}},
			{"limit", backend.RetryQueueParams{Queue: f.queue, State: backend.StateFailed, Limit: backend.MaxBatchLimit + 1, Now: f.now}},
			{"queue", backend.RetryQueueParams{Queue: "no spaces", State: backend.StateFailed, Limit: 1, Now: f.now}},
			{"now", backend.RetryQueueParams{Queue: f.queue, State: backend.StateFailed, Limit: 1}},
		}
		for _, c := range bad {
			_, err := f.b.RetryQueue(f.ctx, c.p)
			wantInvalid(t, err, -1, c.field)
			_, err = f.b.Purge(f.ctx, backend.PurgeParams{Queue: c.p.Queue, State: c.p.State, Limit: c.p.Limit, Now: c.p.Now})
			if c.p.State == backend.StateFailed {
				wantInvalid(t, err, -1, c.field)
			}
		}
		_, err := f.b.Purge(f.ctx, backend.PurgeParams{Queue: f.queue, State: "bogus", Limit: 1, Now: f.now})
		wantInvalid(t, err, -1, "state")
		f.unchanged(before, "refused bulk calls change nothing")
	})

	// Retry, RunNow and RetryQueue make a job pending: a subscription hears it.
	signals := []struct {
		name    string
		prepare func(f *fixture) func()
	}{
		{"Retry", func(f *fixture) func() {
			id := f.finish(backend.RetainForever, backend.StateFailed)
			return func() { f.mustRetry(id) }
		}},
		{"RunNow", func(f *fixture) func() {
			id := f.waiting(backend.StateScheduled, backend.NewJob{})
			return func() {
				if _, err := f.runNow(id); err != nil {
					f.t.Fatalf("RunNow: %v", err)
				}
			}
		}},
		{"RetryQueue", func(f *fixture) func() {
			f.finish(backend.RetainForever, backend.StateCancelled)
			return func() {
				if n := f.retryQueue(f.queue, backend.StateCancelled, 10); n != 1 {
					f.t.Fatalf("RetryQueue retried %d jobs; want 1", n)
				}
			}
		}},
	}
	for _, c := range signals {
		t.Run("Signals/"+c.name, func(t *testing.T) {
			f := start(t, factory)
			act := c.prepare(f)
			sub := f.subscribe(f.queue)
			act()
			f.wantSignal(sub, c.name+" made a job pending in the subscribed queue")
		})
	}
}
