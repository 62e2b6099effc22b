package periodic

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// entry is one schedule with its parsed spec.
type entry struct {
	sched Schedule
	spec  Spec
}

// newEntry validates one schedule and copies its template.
func newEntry(sc Schedule, opts Options) (entry, *ScheduleError) {
	fail := func(reason string, err error) (entry, *ScheduleError) {
		return entry{}, &ScheduleError{Name: sc.Name, Reason: reason, Err: err}
	}
	switch {
	case sc.Name == "":
		return fail("empty name", nil)
	case len(sc.Name) > MaxNameLen:
		return fail(fmt.Sprintf("the name is longer than %d bytes", MaxNameLen), nil)
	case sc.CatchUp != CatchUpLast && sc.CatchUp != CatchUpNone:
		return fail(fmt.Sprintf("unknown catch-up policy %d", int(sc.CatchUp)), nil)
	case !sc.Job.RunAt.IsZero():
		return fail("the job template sets RunAt; the scheduler sets it to each tick", nil)
	case !sc.Job.Deadline.IsZero():
		return fail("the job template sets Deadline, a fixed time that later ticks would pass", nil)
	case sc.Job.UniqueKey != "" || sc.Job.UniqueFor != 0:
		return fail("the job template sets UniqueKey or UniqueFor; the scheduler sets them for each tick", nil)
	}
	spec, err := ParseSpec(sc.Spec)
	if err != nil {
		reason := err.Error()
		if se, ok := err.(*SpecError); ok {
			reason = fmt.Sprintf("spec %q: %s", se.Spec, se.Reason)
		}
		return fail(reason, err)
	}
	sc.Job = cloneJob(sc.Job)
	e := entry{sched: sc, spec: spec}
	// Try the template as one tick would be enqueued, with no store involved.
	probeNow := time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)
	p := backend.EnqueueParams{Jobs: []backend.NewJob{e.job(spec.Prev(probeNow))}, Now: probeNow, MaxPayload: opts.MaxPayload}
	if err := p.Prepare(); err != nil {
		return fail(fmt.Sprintf("the job template is invalid: %v", err), err)
	}
	return e, nil
}

// cloneJob copies a template so the caller's slices and maps stay theirs.
func cloneJob(j backend.NewJob) backend.NewJob {
	j.Payload = slices.Clone(j.Payload)
	j.Tags = slices.Clone(j.Tags)
	j.Metadata = maps.Clone(j.Metadata)
	return j
}

// tickKey is the unique key of tick t of the schedule named name.
func tickKey(name string, t time.Time) string {
	return UniqueKeyPrefix + name + ":" + t.UTC().Format(time.RFC3339Nano)
}

// job builds the job for tick t.
func (e entry) job(t time.Time) backend.NewJob {
	j := cloneJob(e.sched.Job)
	if j.Metadata == nil {
		j.Metadata = make(map[string]string, 2)
	}
	j.Metadata[MetaSchedule] = e.sched.Name
	j.Metadata[MetaTick] = t.UTC().Format(time.RFC3339Nano)
	j.RunAt = t
	j.UniqueKey = tickKey(e.sched.Name, t)
	j.UniqueFor = e.uniqueFor(t)
	return j
}

// MinAllowance is the least time a tick stays due after it falls; see
// Scheduler.Tick.
const MinAllowance = 30 * time.Second

// allowance is how long tick t stays due after it falls: the gap to the
// next tick, at least MinAllowance. The latest tick at or before any time
// is always within its allowance.
func (e entry) allowance(t time.Time) time.Duration {
	gap := 366 * 24 * time.Hour // no next tick within five years
	if n := e.spec.Next(t); !n.IsZero() {
		gap = n.Sub(t)
	}
	return max(gap, MinAllowance)
}

// uniqueFor is how long tick t's key is held: twice its allowance. Every
// process enqueues t at or after t by its own clock and no later than the
// allowance, so a process's attempt finds the key of another's held as long
// as their clocks differ by less than the allowance; pruning the finished
// job early does not free it.
func (e entry) uniqueFor(t time.Time) time.Duration {
	return 2 * e.allowance(t)
}

// late reports whether tick t is past its allowance at now.
func (e entry) late(t, now time.Time) bool {
	return now.Sub(t) >= e.allowance(t)
}
