package kyu

import (
	"context"
	"errors"
	"fmt"

	"github.com/kyuhq/kyu/backend"
)

// runKey is the context key under which a Worker puts the running job's
// run into its handler's context.
type runKey struct{}

// runFrom returns the run of the handler whose context ctx is, or an
// error matching ErrNotInHandler.
func runFrom(ctx context.Context) (*jobRun, error) {
	run, _ := ctx.Value(runKey{}).(*jobRun)
	if run == nil {
		return nil, ErrNotInHandler
	}
	return run, nil
}

// Progress records the progress of the job whose handler's context ctx is:
// percent in [0, 100] and a short message (at most 1 KiB of UTF-8). It
// replaces the progress reported before, also by an earlier attempt, and
// is visible as Job.Progress, with the time it was recorded.
//
// Reports are sent to the store in batches, a fraction of a second after
// the call, and in any case before the job's outcome is recorded; a store
// that refuses them is logged by the worker, not returned here. Progress
// returns a *ValidationError for bad input, and an error matching
// ErrNotInHandler outside a handler or once its handler has returned.
func Progress(ctx context.Context, percent float64, msg string) error {
	run, err := runFrom(ctx)
	if err != nil {
		return fmt.Errorf("kyu: progress: %w", err)
	}
	p := &backend.Progress{Percent: percent, Message: msg}
	if err := checkReport(backend.ReportItem{Progress: p}); err != nil {
		return err
	}
	return run.w().reports.add(run, p, "")
}

// Log appends a line to the log of the job whose handler's context ctx
// is, stamped with the time it is recorded. A job keeps the first
// WorkerConfig.MaxLogLines lines of all its attempts; lines past the cap
// are counted in Job.LogsDropped, and the worker logs once per job when a
// job first logs past it. A line is at most 8 KiB of UTF-8.
//
// Lines are sent as Progress reports are, and a line logged before the
// handler returns is stored before the job's outcome. Log returns a
// *ValidationError for bad input, and an error matching ErrNotInHandler
// outside a handler or once its handler has returned.
func Log(ctx context.Context, line string) error {
	run, err := runFrom(ctx)
	if err != nil {
		return fmt.Errorf("kyu: log: %w", err)
	}
	if err := checkReport(backend.ReportItem{Logs: []string{line}}); err != nil {
		return err
	}
	return run.w().reports.add(run, nil, line)
}

// Logf is Log with a line formatted as fmt.Sprintf does.
func Logf(ctx context.Context, format string, args ...any) error {
	return Log(ctx, fmt.Sprintf(format, args...))
}

// checkReport validates one report with the store's own checks, as a
// *ValidationError outside a batch.
func checkReport(item backend.ReportItem) error {
	p := backend.ReportParams{Items: []backend.ReportItem{item}, Now: backend.MinTime()}
	err := p.Check()
	var verr *ValidationError
	if errors.As(err, &verr) {
		c := *verr
		c.Index = -1
		return &c
	}
	return err
}
