package kyu

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// heartbeatLoop extends the leases of all running jobs every
// HeartbeatInterval in one Heartbeat call, and cancels the context of every
// job whose lease the backend reports lost (cause ErrLeaseLost) or whose
// cancel was requested (cause ErrCancelled; the handler's outcome is then
// recorded as usual, and the store ends the job cancelled). Leases of jobs
// whose handler has returned are extended too (their outcome may take a
// while to be recorded), but such a lease reported lost is skipped
// silently: most often the completer recorded the outcome between the
// snapshot and the heartbeat, and otherwise there is no handler left to
// cancel.
//
// After each heartbeat, and in between often enough to act within the
// lease margin (checkInterval), it checks every running handler (see
// checkRuns): one whose lease is about to expire unrenewed is cancelled,
// one that has overrun its timeout by the grace is abandoned. One loop
// does this for every job: there is no timer per job.
func (w *Worker) heartbeatLoop(ctx context.Context) {
	beat := time.NewTicker(w.cfg.HeartbeatInterval)
	defer beat.Stop()
	var checkC <-chan time.Time
	if d := w.checkInterval(); d < w.cfg.HeartbeatInterval {
		check := time.NewTicker(d)
		defer check.Stop()
		checkC = check.C
	}
	var runs []*jobRun
	var leases []backend.Lease
	var renewed []bool
	for {
		beating := false
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			beating = true
		case <-checkC:
		}
		runs, leases = w.snapshotLeases(runs[:0], leases[:0])
		if len(runs) == 0 {
			continue
		}
		renewed = slices.Grow(renewed[:0], len(runs))[:len(runs)]
		clear(renewed)
		if beating {
			w.beat(ctx, runs, leases, renewed)
		}
		w.checkRuns(ctx, runs, renewed)
		clear(runs) // do not keep finished runs alive until the next beat
	}
}

// checkInterval is how often running handlers are checked between
// heartbeats: half the lease margin, so that an unrenewed lease is given
// up before it expires.
func (w *Worker) checkInterval() time.Duration {
	return max(w.cfg.leaseMargin()/2, time.Millisecond)
}

// beat extends the leases of runs in one Heartbeat call. It marks in
// renewed each run whose lease was extended, and keeps its new expiry.
func (w *Worker) beat(ctx context.Context, runs []*jobRun, leases []backend.Lease, renewed []bool) {
	now := w.cfg.Clock.Now()
	res, err := w.b.Heartbeat(ctx, backend.HeartbeatParams{
		Leases: leases,
		Extend: w.cfg.Lease,
		Now:    now,
	})
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("kyu: heartbeat failed", "jobs", len(leases), "error", err)
		}
		return
	}
	for i, st := range res.Leases {
		if i >= len(runs) {
			break
		}
		run := runs[i]
		if !st.Lost {
			expires := st.ExpiresAt
			if expires.IsZero() {
				expires = now.Add(w.cfg.Lease)
			}
			run.expires.Store(expires.UnixNano())
			renewed[i] = true
			if st.CancelRequested && run.state.requestCancel() {
				w.log.Info("kyu: job cancel requested; cancelling the job's handler", "job_id", run.lease.JobID, "type", run.jobType)
				run.cancel(ErrCancelled)
			}
			continue
		}
		if !run.state.loseLease() {
			continue
		}
		w.log.Warn("kyu: lease lost; cancelling the job's handler", "job_id", run.lease.JobID, "type", run.jobType)
		run.cancel(ErrLeaseLost)
	}
}

// checkRuns looks at every run whose handler is still running:
//
//   - a handler that has run for its job's timeout plus timeoutGrace is
//     abandoned (see abandonTimedOut);
//   - a handler whose lease was not renewed in this beat and is within
//     leaseMargin of its known expiry has its context cancelled with the
//     cause ErrLeaseLost, and whatever it returns is dropped: the lease is
//     about to die, and RecoverLeases (ours or another process's) will
//     hand the job to another handler, which must not overlap with it.
func (w *Worker) checkRuns(ctx context.Context, runs []*jobRun, renewed []bool) {
	now := w.cfg.Clock.Now().UnixNano()
	margin := w.cfg.leaseMargin().Nanoseconds()
	grace := w.cfg.timeoutGrace()
	for i, run := range runs {
		if !run.state.load().live() {
			continue
		}
		// A job waiting for a handler has no deadline yet.
		if d := run.ctx.deadline.Load(); d != 0 && time.Duration(w.timeouts.now()-d) >= grace {
			w.abandonTimedOut(ctx, run)
			continue
		}
		if renewed[i] || now < run.expires.Load()-margin || !run.state.expireLease() {
			continue
		}
		w.log.Warn("kyu: lease about to expire without renewal; cancelling the job's handler",
			"job_id", run.lease.JobID, "type", run.jobType, "lease_expires_at", time.Unix(0, run.expires.Load()).UTC())
		run.cancel(ErrLeaseLost)
	}
}

// abandonTimedOut gives up on a handler that ignores its context past its
// timeout plus timeoutGrace: the run is marked abandoned (so whatever the
// handler returns later is dropped), forgotten (so its lease is no longer
// extended), its attempt is failed so the job is retried with backoff, and
// its slot is freed. The handler's goroutine cannot be stopped: it is
// leaked, and the log says so.
func (w *Worker) abandonTimedOut(ctx context.Context, run *jobRun) {
	if !run.state.timeOut() {
		return
	}
	w.untrack(run)
	run.cancel(context.DeadlineExceeded)
	// Its goroutine no longer counts among the pool's handlers.
	if run.f.handoff.leave() {
		w.startHandler(run.f)
	}
	w.log.Warn("kyu: handler did not return within its timeout plus grace; attempt failed and slot freed, its goroutine is leaked",
		"job_id", run.lease.JobID, "type", run.jobType, "timeout", run.timeout, "grace", w.cfg.timeoutGrace())

	item := w.failItem(run, errors.New(abandonedMessage), "")
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	w.closeReports(fctx, []*jobRun{run})
	res, err := w.b.Fail(fctx, backend.FailParams{Items: []backend.FailItem{item}, Now: w.cfg.Clock.Now()})
	cancel()
	switch {
	case err != nil:
		w.log.Error("kyu: could not fail the abandoned attempt; the job runs again when its lease expires",
			"job_id", run.lease.JobID, "type", run.jobType, "error", err)
	case len(res.Errors) > 0 && res.Errors[0] != nil:
		w.log.Debug("kyu: abandoned attempt not failed", "job_id", run.lease.JobID, "type", run.jobType, "error", res.Errors[0])
	default:
		w.stats.failed.Add(1)
	}
	run.f.slots.release(run.q)
	run.state.record()
}

// snapshotLeases appends every tracked run and its lease.
func (w *Worker) snapshotLeases(runs []*jobRun, leases []backend.Lease) ([]*jobRun, []backend.Lease) {
	w.runsMu.Lock()
	defer w.runsMu.Unlock()
	for _, run := range w.runs {
		runs = append(runs, run)
		leases = append(leases, run.lease)
	}
	return runs, leases
}
