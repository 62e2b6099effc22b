package kyu

import (
	"context"
	"fmt"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/periodic"
)

// CatchUp says what a worker does, when it starts, about the ticks of a
// periodic job that fell while no worker ran it; see periodic.CatchUp.
type CatchUp = periodic.CatchUp

// Catch-up policies.
const (
	// CatchUpLast enqueues the latest missed tick (once, whatever the
	// number of workers): a downtime costs at most one run. The default.
	CatchUpLast = periodic.CatchUpLast
	// CatchUpNone enqueues only ticks from the start on.
	CatchUpNone = periodic.CatchUpNone
)

// PeriodicJob enqueues a job on a schedule. Any number of workers may run
// the same periodic jobs against one store: each tick is enqueued exactly
// once, through a unique key made of Name and the tick's time, without a
// leader (see package periodic).
type PeriodicJob struct {
	// Name identifies the schedule across processes; required, unique
	// within a worker. Workers that run the same schedule give it the same
	// name.
	Name string
	// Spec is a cron expression (five fields, or six with seconds first;
	// read in UTC unless prefixed by "CRON_TZ=Area/City "), a descriptor
	// such as @hourly, or an interval "@every 90s" counted from the Unix
	// epoch. See periodic.ParseSpec.
	Spec string
	// Type and Payload are the job's.
	Type    string
	Payload []byte

	// The job's options, as EnqueueOptions has them. There is no run-at,
	// deadline or unique key: each tick sets its own run-at and unique key.
	Queue       string
	Title       string
	Priority    int
	MaxAttempts int
	Timeout     time.Duration
	Tags        []string
	Metadata    map[string]string
	Retention   Retention

	// CatchUp is the policy for ticks missed before the worker started;
	// default CatchUpLast.
	CatchUp CatchUp
}

// periodicRetry bounds the pause after a failed periodic Tick; the pause
// starts at PollInterval and doubles up to it.
const periodicRetry = time.Minute

// newScheduler builds the scheduler of cfg.Periodic, or nil when there is
// none.
func newScheduler(b backend.Producer, jobs []PeriodicJob) (*periodic.Scheduler, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	schedules := make([]periodic.Schedule, len(jobs))
	for i, pj := range jobs {
		schedules[i] = periodic.Schedule{Name: pj.Name, Spec: pj.Spec, Job: pj.newJob(), CatchUp: pj.CatchUp}
	}
	s, err := periodic.New(b, schedules, periodic.Options{})
	if err != nil {
		return nil, fmt.Errorf("kyu: WorkerConfig.Periodic: %w", err)
	}
	return s, nil
}

// newJob is the template the scheduler enqueues at each tick.
func (pj PeriodicJob) newJob() backend.NewJob {
	o := EnqueueOptions{
		Queue: pj.Queue, Title: pj.Title, Priority: pj.Priority, MaxAttempts: pj.MaxAttempts,
		Timeout: pj.Timeout, Tags: pj.Tags, Metadata: pj.Metadata, Retention: pj.Retention,
	}
	j, _ := o.newJob(pj.Type, pj.Payload, time.Time{}) // no Delay: cannot fail
	return j
}

// periodicLoop enqueues the ticks of the worker's periodic jobs: it waits
// until the scheduler's next tick on the worker's Clock and calls Tick.
// It reads the Clock at least every PollInterval while it waits, so it
// follows a clock that jumps (a test's clock, a stepped or suspended
// system clock). A failed Tick is logged and tried again after a pause
// that grows from PollInterval to a minute; the ticks' unique keys make
// trying again safe.
func (w *Worker) periodicLoop(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	sleep := func(d time.Duration) bool {
		t.Reset(d)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	var pause time.Duration
	for {
		if next := w.sched.Next(); !next.IsZero() {
			if wait := next.Sub(w.cfg.Clock.Now()); wait > 0 {
				if !sleep(min(wait, w.cfg.PollInterval)) {
					return
				}
				continue
			}
		}
		res, err := w.sched.Tick(ctx, w.cfg.Clock.Now())
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			pause = min(max(2*pause, w.cfg.PollInterval), periodicRetry)
			w.log.Warn("kyu: enqueueing periodic jobs failed; retrying", "error", err, "pause", pause)
			if !sleep(pause) {
				return
			}
			continue
		}
		pause = 0
		for _, tr := range res.Ticks {
			w.log.Debug("kyu: periodic job enqueued", "schedule", tr.Schedule, "tick", tr.At, "job_id", tr.ID, "duplicate", tr.Duplicate)
		}
		for _, g := range res.Skipped {
			w.log.Warn("kyu: periodic ticks skipped: they were past their allowance when the worker got to them (it stalled, or its clock jumped)", "schedule", g.Schedule, "after", g.After, "before", g.Before)
		}
	}
}

// periodicInfo describes the worker's periodic jobs for its registry
// entry at now: each schedule's latest tick at or before now (LastRun)
// and its next one. The ticks are the schedule's: which worker enqueued
// a tick, the store's unique keys decide.
func (w *Worker) periodicInfo(now time.Time) []backend.PeriodicInfo {
	if len(w.cfg.Periodic) == 0 {
		return nil
	}
	out := make([]backend.PeriodicInfo, 0, len(w.cfg.Periodic))
	for _, pj := range w.cfg.Periodic {
		info := backend.PeriodicInfo{Name: pj.Name, Spec: pj.Spec, Queue: pj.Queue, Type: pj.Type}
		if info.Queue == "" {
			info.Queue = backend.DefaultQueue
		}
		if spec, err := periodic.ParseSpec(pj.Spec); err == nil {
			info.LastRun, info.NextRun = spec.Prev(now).UTC(), spec.Next(now).UTC()
		}
		out = append(out, info)
	}
	return out
}
