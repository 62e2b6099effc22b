package kyu

import (
	"context"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// heartbeatLoop extends the leases of all running jobs every
// HeartbeatInterval in one Heartbeat call, and cancels the context of every
// job whose lease the backend reports lost. Leases of jobs whose handler
// has returned are extended too (their outcome may take a while to be
// recorded), but such a lease reported lost is skipped silently: most
// often the completer recorded the outcome between the snapshot and the
// heartbeat, and otherwise there is no handler left to cancel.
func (w *Worker) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.HeartbeatInterval)
	defer t.Stop()
	var runs []*jobRun
	var leases []backend.Lease
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		runs, leases = w.snapshotLeases(runs[:0], leases[:0])
		if len(runs) == 0 {
			continue
		}
		res, err := w.b.Heartbeat(ctx, backend.HeartbeatParams{
			Leases: leases,
			Extend: w.cfg.Lease,
			Now:    w.cfg.Clock.Now(),
		})
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn("kyu: heartbeat failed", "jobs", len(leases), "error", err)
			}
			continue
		}
		for i, st := range res.Leases {
			if i >= len(runs) || !st.Lost {
				continue
			}
			run := runs[i]
			if run.state.Load() != runRunning || run.lost.Swap(true) {
				continue
			}
			w.log.Warn("kyu: lease lost; cancelling the job's handler", "job_id", run.lease.JobID, "type", run.jobType)
			run.cancel()
		}
		clear(runs) // do not keep finished runs alive until the next beat
	}
}

// snapshotLeases appends every tracked run and its lease.
func (w *Worker) snapshotLeases(runs []*jobRun, leases []backend.Lease) ([]*jobRun, []backend.Lease) {
	w.runsMu.Lock()
	defer w.runsMu.Unlock()
	for run := range w.runs {
		runs = append(runs, run)
		leases = append(leases, run.lease)
	}
	return runs, leases
}
