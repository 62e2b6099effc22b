package pebble

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kyuhq/kyu/backend"
)

// acks records what the store acknowledged.
type acks struct {
	mu        sync.Mutex
	enqueued  map[string]bool
	claimed   map[string]int64 // id → token
	completed map[string]bool
}

func newAcks() *acks {
	return &acks{enqueued: map[string]bool{}, claimed: map[string]int64{}, completed: map[string]bool{}}
}

func (a *acks) snapshot() *acks {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := newAcks()
	for k, v := range a.enqueued {
		c.enqueued[k] = v
	}
	for k, v := range a.claimed {
		c.claimed[k] = v
	}
	for k, v := range a.completed {
		c.completed[k] = v
	}
	return c
}

// TestPowerLoss runs writers against a crashable in-memory file system,
// takes a crash clone (which keeps only what was synced) while they run,
// and checks that the clone holds every enqueue, claim and completion
// acknowledged before the clone was taken.
func TestPowerLoss(t *testing.T) {
	t.Parallel()
	for _, unsynced := range []int{0, 50} {
		fs := vfs.NewCrashableMem()
		s := openStore(t, "/kyu", Options{FS: fs})
		a := newAcks()
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		fail := func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if firstErr == nil && !errors.Is(err, context.Canceled) {
				firstErr = err
			}
		}
		var progress sync.WaitGroup
		progress.Add(4)
		for w := range 4 {
			wg.Go(func() {
				reached := false
				defer func() {
					if !reached {
						progress.Done() // failed early: do not hold up the crash
					}
				}()
				now := t0
				for n := 0; ctx.Err() == nil; n++ {
					now = now.Add(time.Millisecond)
					jobs := make([]backend.NewJob, 1+w)
					for i := range jobs {
						jobs[i] = backend.NewJob{Type: "t", Payload: []byte("payload"), Retention: backend.RetainForever}
					}
					res, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: now})
					if err != nil {
						fail(err)
						return
					}
					a.mu.Lock()
					for _, j := range res.Jobs {
						a.enqueued[j.ID] = true
					}
					a.mu.Unlock()
					cl, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{backend.DefaultQueue}, Max: 2, Lease: time.Hour, Now: now})
					if err != nil {
						fail(err)
						return
					}
					a.mu.Lock()
					for _, j := range cl.Jobs {
						a.claimed[j.ID] = j.LeaseToken
					}
					a.mu.Unlock()
					var items []backend.CompleteItem
					for _, j := range cl.Jobs {
						if rand.IntN(2) == 0 {
							items = append(items, backend.CompleteItem{Lease: leaseOf(j), Result: []byte("r")})
						}
					}
					if len(items) > 0 {
						r, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: now})
						if err != nil {
							fail(err)
							return
						}
						a.mu.Lock()
						for i, e := range r.Errors {
							if e == nil {
								a.completed[items[i].Lease.JobID] = true
							}
						}
						a.mu.Unlock()
					}
					if n == 20 {
						reached = true
						progress.Done()
					}
				}
			})
		}
		progress.Wait() // every writer is well under way
		before := a.snapshot()
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced, RNG: rand.New(rand.NewPCG(1, uint64(unsynced)))})
		stop()
		wg.Wait()
		if firstErr != nil {
			t.Fatal(firstErr)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		r := openStore(t, "/kyu", Options{FS: crashed})
		for id := range before.enqueued {
			j, err := r.Get(context.Background(), backend.GetParams{ID: id})
			if err != nil {
				t.Fatalf("unsynced %d%%: acknowledged enqueue %s lost: %v", unsynced, id, err)
			}
			if string(j.Payload) != "payload" {
				t.Fatalf("job %s payload %q", id, j.Payload)
			}
			if tok, ok := before.claimed[id]; ok && (j.LeaseToken < tok || j.State == backend.StatePending) {
				t.Fatalf("acknowledged claim of %s (token %d) lost: state %s token %d", id, tok, j.State, j.LeaseToken)
			}
			if before.completed[id] && (j.State != backend.StateCompleted || string(j.Result) != "r") {
				t.Fatalf("acknowledged completion of %s lost: state %s", id, j.State)
			}
		}
		t.Logf("unsynced %d%%: %d enqueues, %d claims, %d completions acknowledged before the crash, all present",
			unsynced, len(before.enqueued), len(before.claimed), len(before.completed))
	}
}

// TestPowerLossEveryChange makes each kind of state change in turn and,
// right after it is acknowledged, takes a crash clone (which keeps only
// what was synced), opens it and checks that the change is there. A
// clone per step matters: a later operation's sync would otherwise hide
// an operation that answered before its own write was durable.
func TestPowerLossEveryChange(t *testing.T) {
	t.Parallel()
	for _, unsynced := range []int{0, 50} {
		t.Run(fmt.Sprintf("unsynced%d", unsynced), func(t *testing.T) {
			t.Parallel()
			testPowerLossEveryChange(t, unsynced)
		})
	}
}

func testPowerLossEveryChange(t *testing.T, unsynced int) {
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	s := openStore(t, "/kyu", Options{FS: fs})
	rng := rand.New(rand.NewPCG(2, uint64(unsynced)))

	// crash opens a crash clone of the store as it is now and runs check on
	// it; the clone is thrown away afterwards.
	crash := func(step string, check func(r *Store)) {
		t.Helper()
		clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced, RNG: rng})
		r, err := Open("/kyu", Options{FS: clone})
		if err != nil {
			t.Fatalf("%s: open the crash clone: %v", step, err)
		}
		defer r.Close()
		check(r)
	}
	// job is a NewJob that no retention deletes unless a step says so.
	job := func(queue string, j backend.NewJob) backend.NewJob {
		j.Queue, j.Type = queue, "t"
		if j.Retention == backend.RetainDefault {
			j.Retention = backend.RetainForever
		}
		return j
	}
	one := func(now time.Time, j backend.NewJob) string {
		t.Helper()
		return enqueue(t, s, now, j)[0].ID
	}
	claimOne := func(b *Store, now time.Time, queue, want string) *backend.Job {
		t.Helper()
		got := claim(t, b, now, 2, queue)
		if len(got) != 1 || got[0].ID != want {
			t.Fatalf("claim of %s at %s = %d jobs; want %s alone", queue, now.Format(time.TimeOnly), len(got), want)
		}
		return got[0]
	}
	ok := func(what string, res backend.BatchResult, err error) {
		t.Helper()
		if err != nil || len(res.Errors) != 1 || res.Errors[0] != nil {
			t.Fatalf("%s = %+v, %v; want one success", what, res, err)
		}
	}
	lastError := func(j *backend.Job) backend.AttemptError {
		if len(j.Errors) == 0 {
			return backend.AttemptError{}
		}
		return j.Errors[len(j.Errors)-1]
	}
	now := t0

	// Fail with a retry time.
	failID := one(now, job("fail", backend.NewJob{MaxAttempts: 5}))
	j := claimOne(s, now, "fail", failID)
	res, err := s.Fail(ctx, backend.FailParams{Items: []backend.FailItem{{Lease: leaseOf(j), Message: "boom", RetryAt: now.Add(time.Minute)}}, Now: now})
	ok("Fail with retry", res, err)
	crash("Fail with retry", func(r *Store) {
		j := get(t, r, failID)
		if j.State != backend.StateRetry || !j.RunAt.Equal(now.Add(time.Minute)) || j.Attempt != 1 || lastError(j).Message != "boom" {
			t.Fatalf("after Fail with retry: %s run_at %s attempt %d errors %+v", j.State, j.RunAt, j.Attempt, j.Errors)
		}
		if got := claim(t, r, now.Add(time.Minute-time.Millisecond), 1, "fail"); len(got) != 0 {
			t.Fatal("a retry job was claimable before its retry time")
		}
		if j := claimOne(r, now.Add(time.Minute), "fail", failID); j.Attempt != 2 || j.LeaseToken != 2 {
			t.Fatalf("retried job claimed with attempt %d token %d; want 2, 2", j.Attempt, j.LeaseToken)
		}
	})

	// Fail, final.
	now = now.Add(time.Minute)
	j = claimOne(s, now, "fail", failID)
	res, err = s.Fail(ctx, backend.FailParams{Items: []backend.FailItem{{Lease: leaseOf(j), Message: "fatal", Final: true}}, Now: now})
	ok("final Fail", res, err)
	crash("final Fail", func(r *Store) {
		j := get(t, r, failID)
		if j.State != backend.StateFailed || !j.FinishedAt.Equal(now) || len(j.Errors) != 2 || lastError(j).Message != "fatal" {
			t.Fatalf("after a final Fail: %s finished %s errors %+v", j.State, j.FinishedAt, j.Errors)
		}
	})

	// Release.
	relID := one(now, job("rel", backend.NewJob{}))
	j = claimOne(s, now, "rel", relID)
	res, err = s.Release(ctx, backend.ReleaseParams{Leases: []backend.Lease{leaseOf(j)}, Now: now})
	ok("Release", res, err)
	crash("Release", func(r *Store) {
		j := get(t, r, relID)
		if j.State != backend.StatePending || j.Attempt != 0 || lastError(j).Kind != backend.AttemptInterrupted {
			t.Fatalf("after Release: %s attempt %d errors %+v", j.State, j.Attempt, j.Errors)
		}
		if j := claimOne(r, now, "rel", relID); j.Attempt != 1 || j.LeaseToken != 2 {
			t.Fatalf("released job claimed with attempt %d token %d; want 1, 2", j.Attempt, j.LeaseToken)
		}
	})

	// Heartbeat: the lease, claimed for a minute, is extended to an hour.
	hbID := one(now, job("hb", backend.NewJob{}))
	hb := claimOne(s, now, "hb", hbID)
	hres, err := s.Heartbeat(ctx, backend.HeartbeatParams{Leases: []backend.Lease{leaseOf(hb)}, Extend: time.Hour, Now: now})
	if err != nil || hres.Leases[0].Lost {
		t.Fatalf("Heartbeat = %+v, %v", hres, err)
	}
	crash("Heartbeat", func(r *Store) {
		if j := get(t, r, hbID); j.State != backend.StateActive || !j.LeaseExpiresAt.Equal(now.Add(time.Hour)) {
			t.Fatalf("after Heartbeat: %s, lease expires %s; want active until %s", j.State, j.LeaseExpiresAt, now.Add(time.Hour))
		}
		later := now.Add(30 * time.Minute)
		if m, err := r.RecoverLeases(ctx, backend.MaintenanceParams{Now: later}); err != nil || m.Moved != 0 {
			t.Fatalf("RecoverLeases inside the extended lease = %+v, %v; want nothing moved", m, err)
		}
		res, err := r.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: leaseOf(hb)}}, Now: later})
		ok("Complete inside the extended lease", res, err)
	})
	res, err = s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: leaseOf(hb)}}, Now: now})
	ok("Complete", res, err)

	// Delete, of a plain job and of the holder of a key with a UniqueFor
	// period (the key keeps holding).
	delID := one(now, job("del", backend.NewJob{}))
	heldID := one(now, job("del", backend.NewJob{UniqueKey: "held", UniqueFor: time.Hour}))
	heldUntil := now.Add(time.Hour)
	for _, id := range []string{delID, heldID} {
		if err := s.Delete(ctx, backend.DeleteParams{ID: id, Now: now}); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	crash("Delete", func(r *Store) {
		for _, id := range []string{delID, heldID} {
			if _, err := r.Get(ctx, backend.GetParams{ID: id}); !errors.Is(err, backend.ErrNotFound) {
				t.Fatalf("Get of a deleted job = %v; want ErrNotFound", err)
			}
		}
		if got := claim(t, r, now, 10, "del"); len(got) != 0 {
			t.Fatalf("claimed %d deleted jobs", len(got))
		}
		if e := enqueue(t, r, now, job("del", backend.NewJob{UniqueKey: "held"}))[0]; !e.Duplicate || e.ID != heldID {
			t.Fatalf("key of a deleted holder within UniqueFor: %+v; want a duplicate of %s", e, heldID)
		}
	})

	// Unique keys: a held key refuses a duplicate; completion frees it.
	uID := one(now, job("uq", backend.NewJob{UniqueKey: "k"}))
	if e := enqueue(t, s, now, job("uq", backend.NewJob{UniqueKey: "k"}))[0]; !e.Duplicate || e.ID != uID {
		t.Fatalf("second enqueue of key k = %+v; want a duplicate of %s", e, uID)
	}
	crash("unique key held", func(r *Store) {
		if e := enqueue(t, r, now, job("uq", backend.NewJob{UniqueKey: "k"}))[0]; !e.Duplicate || e.ID != uID || e.State != backend.StatePending {
			t.Fatalf("enqueue of a held key = %+v; want a duplicate of pending %s", e, uID)
		}
	})
	j = claimOne(s, now, "uq", uID)
	res, err = s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: leaseOf(j), Result: []byte("r")}}, Now: now})
	ok("Complete of the key's holder", res, err)
	crash("unique key freed", func(r *Store) {
		if j := get(t, r, uID); j.State != backend.StateCompleted || string(j.Result) != "r" {
			t.Fatalf("after Complete: %s result %q", j.State, j.Result)
		}
		if e := enqueue(t, r, now, job("uq", backend.NewJob{UniqueKey: "k"}))[0]; e.Duplicate {
			t.Fatalf("enqueue of a key freed by completion = %+v; want a new job", e)
		}
	})

	// Promote: a scheduled job becomes pending; a scheduled job and a
	// pending one past their deadlines are cancelled.
	schedID := one(now, job("sched", backend.NewJob{RunAt: now.Add(time.Minute)}))
	lateID := one(now, job("late", backend.NewJob{RunAt: now.Add(time.Minute), Deadline: now.Add(2 * time.Minute)}))
	dlID := one(now, job("dl", backend.NewJob{Deadline: now.Add(2 * time.Minute)}))
	now = now.Add(2 * time.Minute)
	m, err := s.Promote(ctx, backend.MaintenanceParams{Now: now})
	if err != nil || m.Moved != 1 || m.Cancelled != 2 {
		t.Fatalf("Promote = %+v, %v; want Moved 1, Cancelled 2", m, err)
	}
	crash("Promote", func(r *Store) {
		if j := get(t, r, schedID); j.State != backend.StatePending {
			t.Fatalf("promoted job is %s", j.State)
		}
		for _, id := range []string{lateID, dlID} {
			if j := get(t, r, id); j.State != backend.StateCancelled || j.CancelReason != backend.CancelReasonDeadline {
				t.Fatalf("job past its deadline is %s (reason %q)", j.State, j.CancelReason)
			}
		}
	})

	// RecoverLeases: one job goes back to pending, one (out of attempts)
	// to failed.
	backID := one(now, job("rec", backend.NewJob{MaxAttempts: 2}))
	deadID := one(now, job("rec", backend.NewJob{MaxAttempts: 1}))
	if got := claim(t, s, now, 2, "rec"); len(got) != 2 {
		t.Fatalf("claimed %d jobs of rec; want 2", len(got))
	}
	now = now.Add(time.Minute) // the one-minute leases expire
	m, err = s.RecoverLeases(ctx, backend.MaintenanceParams{Now: now})
	if err != nil || m.Moved != 2 || m.Failed != 1 {
		t.Fatalf("RecoverLeases = %+v, %v; want Moved 2, Failed 1", m, err)
	}
	crash("RecoverLeases", func(r *Store) {
		if j := get(t, r, deadID); j.State != backend.StateFailed || lastError(j).Kind != backend.AttemptLeaseExpired {
			t.Fatalf("recovered job out of attempts: %s errors %+v; want failed, lease_expired", j.State, j.Errors)
		}
		if j := get(t, r, backID); j.State != backend.StatePending || lastError(j).Kind != backend.AttemptLeaseExpired {
			t.Fatalf("recovered job: %s errors %+v; want pending, lease_expired", j.State, j.Errors)
		}
		if j := claimOne(r, now, "rec", backID); j.Attempt != 2 || j.LeaseToken != 2 {
			t.Fatalf("recovered job claimed with attempt %d token %d; want 2, 2", j.Attempt, j.LeaseToken)
		}
	})

	// ApplyRetention: a completed job kept for an hour is deleted.
	retID := one(now, job("ret", backend.NewJob{Retention: backend.RetainFor(time.Hour)}))
	j = claimOne(s, now, "ret", retID)
	res, err = s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: leaseOf(j)}}, Now: now})
	ok("Complete of a job kept an hour", res, err)
	now = now.Add(time.Hour)
	if !now.After(heldUntil) {
		t.Fatal("the timeline must pass the end of the held key's UniqueFor period")
	}
	m, err = s.ApplyRetention(ctx, backend.MaintenanceParams{Now: now})
	if err != nil || m.Moved != 1 {
		t.Fatalf("ApplyRetention = %+v, %v; want Moved 1", m, err)
	}
	crash("ApplyRetention", func(r *Store) {
		if _, err := r.Get(ctx, backend.GetParams{ID: retID}); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("Get of a job retention deleted = %v; want ErrNotFound", err)
		}
		if m, err := r.ApplyRetention(ctx, backend.MaintenanceParams{Now: now}); err != nil || m.Moved != 0 {
			t.Fatalf("ApplyRetention again after the crash = %+v, %v; want nothing left", m, err)
		}
		if e := enqueue(t, r, now, job("del", backend.NewJob{UniqueKey: "held"}))[0]; e.Duplicate {
			t.Fatalf("key past its UniqueFor period = %+v; want a new job", e)
		}
	})

	// Cancel: a pending job at once, an active one by request.
	activeID := one(now, job("cancel", backend.NewJob{}))
	active := claimOne(s, now, "cancel", activeID)
	waitID := one(now, job("cancel", backend.NewJob{}))
	if _, err := s.Cancel(ctx, backend.CancelParams{ID: waitID, Now: now}); err != nil {
		t.Fatalf("Cancel of a pending job: %v", err)
	}
	if _, err := s.Cancel(ctx, backend.CancelParams{ID: activeID, Now: now}); err != nil {
		t.Fatalf("Cancel of an active job: %v", err)
	}
	crash("Cancel", func(r *Store) {
		if j := get(t, r, waitID); j.State != backend.StateCancelled || j.CancelReason != backend.CancelReasonRequested {
			t.Fatalf("cancelled pending job: %s (reason %q)", j.State, j.CancelReason)
		}
		hb, err := r.Heartbeat(ctx, backend.HeartbeatParams{Leases: []backend.Lease{leaseOf(active)}, Extend: time.Minute, Now: now})
		if err != nil || hb.Leases[0].Lost || !hb.Leases[0].CancelRequested {
			t.Fatalf("Heartbeat of the active job after a cancel request = %+v, %v", hb, err)
		}
	})

	// Report: progress and log lines.
	res, err = s.Report(ctx, backend.ReportParams{Items: []backend.ReportItem{{
		Lease: leaseOf(active), Progress: &backend.Progress{Percent: 40, Message: "m"}, Logs: []string{"one", "two"},
	}}, Now: now})
	ok("Report", res, err)
	crash("Report", func(r *Store) {
		j := get(t, r, activeID)
		if j.Progress == nil || j.Progress.Percent != 40 || len(j.Logs) != 2 || j.Logs[1].Line != "two" {
			t.Fatalf("after Report: progress %+v logs %+v", j.Progress, j.Logs)
		}
	})
	res, err = s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: leaseOf(active)}}, Now: now})
	ok("Complete of a job whose cancel was requested", res, err)
	crash("Complete after a cancel request", func(r *Store) {
		if j := get(t, r, activeID); j.State != backend.StateCancelled || len(j.Logs) != 2 {
			t.Fatalf("after Complete of a job whose cancel was requested: %s, %d lines", j.State, len(j.Logs))
		}
	})

	// Retry of the cancelled job.
	if _, err := s.Retry(ctx, backend.RetryParams{ID: waitID, Now: now}); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	crash("Retry", func(r *Store) {
		if j := get(t, r, waitID); j.State != backend.StatePending || !j.FinishedAt.IsZero() {
			t.Fatalf("after Retry: %s finished %s", j.State, j.FinishedAt)
		}
		claimOne(r, now, "cancel", waitID)
	})

	// Purge: the retried job and the cancelled one, with its log lines.
	for _, st := range []backend.State{backend.StatePending, backend.StateCancelled} {
		if c, err := s.Purge(ctx, backend.PurgeParams{Queue: "cancel", State: st, Limit: 10, Now: now}); err != nil || c.Count != 1 {
			t.Fatalf("Purge of %s = %+v, %v; want 1", st, c, err)
		}
	}
	crash("Purge", func(r *Store) {
		for _, id := range []string{waitID, activeID} {
			if _, err := r.Get(ctx, backend.GetParams{ID: id}); !errors.Is(err, backend.ErrNotFound) {
				t.Fatalf("Get of a purged job = %v; want ErrNotFound", err)
			}
		}
		if n := countKeys(t, r, prefixLog); n != 0 {
			t.Fatalf("%d log lines left after the purge", n)
		}
	})

	// Pause.
	paused := true
	if _, err := s.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: "paused", Paused: &paused, Now: now}); err != nil {
		t.Fatalf("UpdateQueue: %v", err)
	}
	one(now, job("paused", backend.NewJob{}))
	crash("pause", func(r *Store) {
		if got := claim(t, r, now, 10, "paused"); len(got) != 0 {
			t.Fatalf("claimed %d jobs of a paused queue after the crash", len(got))
		}
		st, err := r.Stats(ctx, backend.StatsParams{Now: now, Minutes: 1})
		if err != nil || findQueue(t, st, "paused").Counts[backend.StatePending] != 1 || st.Processed == 0 {
			t.Fatalf("Stats after the crash = %+v, %v", st, err)
		}
	})
}
