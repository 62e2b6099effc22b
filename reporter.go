package kyu

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/internal/lifecycle"
)

// reportInterval is how long the reporter gathers progress and log lines
// before it sends them: one Report call carries what every handler
// reported in that time.
const reportInterval = 100 * time.Millisecond

// runReport is what a handler has reported (Progress, Log) and the worker
// not yet sent, and what is needed to send it in order: every report of a
// run reaches the store before its outcome. A run gets one on its first
// report, so a handler that reports nothing costs nothing here.
type runReport struct {
	// flushing is held while this run's reports are being sent, so that
	// closing the run waits for a send in flight.
	flushing sync.Mutex

	mu       sync.Mutex // guards the fields below
	progress *backend.Progress
	logs     []string
	// queued: the run is in the reporter's queue.
	queued bool
	// closed: the handler has returned or been abandoned; no more reports.
	closed bool
	// lines counts the lines the job holds or was sent, to notice the cap.
	lines     int
	capLogged bool
}

// take removes the pending reports, under flushing; ok is false when
// there are none.
func (r *runReport) take(lease backend.Lease) (item backend.ReportItem, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queued = false
	if r.progress == nil && len(r.logs) == 0 {
		return backend.ReportItem{}, false
	}
	item = backend.ReportItem{Lease: lease, Progress: r.progress, Logs: r.logs}
	r.progress, r.logs = nil, nil
	return item, true
}

// openReport returns the run's report, made on first use, or an error
// matching ErrNotInHandler once reporting is closed.
func (run *jobRun) openReport() (*runReport, error) {
	for {
		if run.reportClosed.Load() {
			return nil, fmt.Errorf("kyu: job %s: its handler has returned: %w", run.lease.JobID, ErrNotInHandler)
		}
		if rep := run.report.Load(); rep != nil {
			return rep, nil
		}
		// Checked again on the next turn: closeReport sets reportClosed
		// before it loads report, so a report published here is either
		// seen and closed by it, or refused by that check.
		run.report.CompareAndSwap(nil, &runReport{lines: run.logLines})
	}
}

// closeReport ends reporting for the run, once no send of its reports is
// in flight, and returns what is still pending. It may be called more than
// once; later calls return nothing.
func (run *jobRun) closeReport() (item backend.ReportItem, ok bool) {
	run.reportClosed.Store(true)
	rep := run.report.Load()
	if rep == nil {
		return backend.ReportItem{}, false
	}
	rep.flushing.Lock()
	defer rep.flushing.Unlock()
	rep.mu.Lock()
	rep.closed = true
	rep.mu.Unlock()
	return rep.take(run.lease)
}

// reporter sends the reports of running handlers in batches, every
// reportInterval while there are any. A run's last reports are sent by
// whoever records its outcome (see Worker.closeReports), just before.
type reporter struct {
	w    *Worker
	loop lifecycle.Loop
	wake chan struct{} // signalled (coalescing) when a run is queued

	mu    sync.Mutex
	queue []*jobRun
}

func newReporter(w *Worker) *reporter {
	return &reporter{w: w, wake: make(chan struct{}, 1)}
}

// add queues a progress or a log line of run.
func (r *reporter) add(run *jobRun, p *backend.Progress, line string) error {
	rep, err := run.openReport()
	if err != nil {
		return err
	}
	rep.mu.Lock()
	if rep.closed {
		rep.mu.Unlock()
		return fmt.Errorf("kyu: job %s: its handler has returned: %w", run.lease.JobID, ErrNotInHandler)
	}
	if p != nil {
		rep.progress = p
	} else {
		rep.logs = append(rep.logs, line)
		rep.lines++
	}
	full := !rep.capLogged && rep.lines > r.w.maxLogLines()
	if full {
		rep.capLogged = true
	}
	enqueue := !rep.queued
	rep.queued = true
	rep.mu.Unlock()

	if full {
		r.w.log.Warn("kyu: job's log is full; further lines are counted in its LogsDropped, not stored",
			"job_id", run.lease.JobID, "type", run.jobType, "max_log_lines", r.w.maxLogLines())
	}
	if enqueue {
		r.mu.Lock()
		r.queue = append(r.queue, run)
		r.mu.Unlock()
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

func (r *reporter) run(ctx context.Context) {
	t := time.NewTimer(reportInterval)
	t.Stop()
	defer t.Stop()
	var runs []*jobRun
	for {
		select {
		case <-ctx.Done():
			return // what is queued goes with each run's outcome
		case <-r.wake:
		}
		t.Reset(reportInterval)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		runs, r.queue = r.queue, runs[:0]
		r.mu.Unlock()
		r.flush(ctx, runs)
		clear(runs)
	}
}

// flush sends the pending reports of runs in one call. It holds each
// run's flushing lock until the call returns, so that an outcome recorded
// meanwhile waits for its reports to land first.
func (r *reporter) flush(ctx context.Context, runs []*jobRun) {
	items := make([]backend.ReportItem, 0, len(runs))
	sent := make([]*jobRun, 0, len(runs))
	for _, run := range runs {
		rep := run.report.Load() // set: the run was queued by a report
		rep.flushing.Lock()
		if item, ok := rep.take(run.lease); ok {
			items = append(items, item)
			sent = append(sent, run)
		} else {
			rep.flushing.Unlock()
		}
	}
	defer func() {
		for _, run := range sent {
			run.report.Load().flushing.Unlock()
		}
	}()
	r.w.sendReports(context.WithoutCancel(ctx), sent, items)
}

// closeReports ends reporting for runs whose handler has returned or been
// abandoned and sends, in one call, what they reported and was not yet
// sent. It returns once that is stored (or refused), so the runs'
// outcomes may be recorded next.
func (w *Worker) closeReports(ctx context.Context, runs []*jobRun) {
	var items []backend.ReportItem
	var with []*jobRun
	for _, run := range runs {
		if item, ok := run.closeReport(); ok {
			items = append(items, item)
			with = append(with, run)
		}
	}
	w.sendReports(ctx, with, items)
}

// sendReports stores items, one per run, within outcomeTimeout, and logs
// what the store refuses.
func (w *Worker) sendReports(ctx context.Context, runs []*jobRun, items []backend.ReportItem) {
	if len(items) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, w.outcomeTimeout)
	defer cancel()
	res, err := w.b.Report(ctx, backend.ReportParams{Items: items, MaxLogLines: w.cfg.MaxLogLines, Now: w.cfg.Clock.Now()})
	if err != nil {
		w.log.Warn("kyu: could not store progress and log lines", "jobs", len(items), "error", err)
		return
	}
	for i, itemErr := range res.Errors {
		if itemErr == nil || i >= len(runs) {
			continue
		}
		level := w.log.Warn
		if errors.Is(itemErr, backend.ErrLeaseLost) {
			level = w.log.Debug
		}
		level("kyu: progress and log lines refused", "job_id", runs[i].lease.JobID, "type", runs[i].jobType, "error", itemErr)
	}
}

// maxLogLines is the effective cap on a job's log lines.
func (w *Worker) maxLogLines() int {
	if w.cfg.MaxLogLines > 0 {
		return w.cfg.MaxLogLines
	}
	return backend.DefaultMaxLogLines
}
