package periodic

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// Scheduler enqueues the ticks of its schedules when the caller calls Tick.
// It starts no goroutines and reads no clock; it is safe for concurrent use.
// Any number of Schedulers, in any number of processes, may run the same
// schedules against one store: each tick is enqueued once.
type Scheduler struct {
	b       backend.Producer
	opts    Options
	entries []entry

	mu      sync.Mutex
	started bool      // a Tick has succeeded
	seen    time.Time // ticks at or before seen are handled
}

// New checks the schedules and returns a Scheduler for them. Each schedule
// needs a non-empty name unique in the slice, a spec that parses and a job
// template that the store would accept; a schedule that fails gives a
// *ScheduleError. At least one schedule is needed.
func New(b backend.Producer, schedules []Schedule, opts Options) (*Scheduler, error) {
	if b == nil {
		return nil, fmt.Errorf("kyu: periodic: nil backend")
	}
	if len(schedules) == 0 {
		return nil, fmt.Errorf("kyu: periodic: no schedules")
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	s := &Scheduler{b: b, opts: opts}
	names := make(map[string]int, len(schedules))
	for i, sc := range schedules {
		if j, ok := names[sc.Name]; ok {
			return nil, &ScheduleError{Index: i, Name: sc.Name, Reason: fmt.Sprintf("the name is used by schedule %d already", j)}
		}
		names[sc.Name] = i
		e, err := newEntry(sc, opts)
		if err != nil {
			err.Index = i
			return nil, err
		}
		s.entries = append(s.entries, e)
	}
	return s, nil
}

// Tick enqueues, in one Enqueue call, the ticks of every schedule that fell
// due since the previous successful Tick, up to and including now; on the
// first call, what each schedule's CatchUp policy says. A tick is due from
// its time until its allowance has passed: the gap to the schedule's next
// tick, at least MinAllowance. A tick older than that when Tick comes (the
// caller stalled) is skipped, as if no process had run then: another process
// enqueued it, or it was missed, and the latest tick is always still due.
// This bounds the work of one call, and is what makes the unique key safe:
// the key is held for twice the allowance. A tick another process enqueued
// already is reported as a duplicate. A now not after the previous call's
// does nothing. On error nothing is marked handled, and the next Tick tries
// the same ticks again (their keys make that safe).
func (s *Scheduler) Tick(ctx context.Context, now time.Time) (Result, error) {
	if err := backend.CheckNow(now); err != nil {
		return Result{}, fmt.Errorf("kyu: periodic tick: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started && !now.After(s.seen) {
		return Result{}, nil
	}
	var (
		res   Result
		jobs  []backend.NewJob
		owner []int // entry index of each job
	)
	for i, e := range s.entries {
		ticks, gap := s.due(e, now)
		if gap != nil {
			res.Skipped = append(res.Skipped, *gap)
		}
		for _, t := range ticks {
			jobs = append(jobs, e.job(t))
			owner = append(owner, i)
		}
	}
	if len(jobs) > 0 {
		out, err := s.b.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: now, MaxPayload: s.opts.MaxPayload})
		if err != nil {
			return Result{}, fmt.Errorf("kyu: periodic tick: enqueue %d ticks: %w", len(jobs), err)
		}
		if len(out.Jobs) != len(jobs) {
			return Result{}, fmt.Errorf("kyu: periodic tick: the store answered %d results for %d ticks", len(out.Jobs), len(jobs))
		}
		for k, r := range out.Jobs {
			res.Ticks = append(res.Ticks, TickResult{
				Schedule:  s.entries[owner[k]].sched.Name,
				At:        jobs[k].RunAt,
				ID:        r.ID,
				Duplicate: r.Duplicate,
			})
		}
	}
	s.started, s.seen = true, now
	return res, nil
}

// due lists the ticks of e to enqueue at now, oldest first, and the range
// it skipped as too late, if any.
func (s *Scheduler) due(e entry, now time.Time) ([]time.Time, *Gap) {
	if !s.started {
		last := e.spec.Prev(now)
		if last.IsZero() || (e.sched.CatchUp == CatchUpNone && !last.Equal(now)) {
			return nil, nil
		}
		return []time.Time{last}, nil
	}
	first := e.spec.Next(s.seen)
	if first.IsZero() || first.After(now) {
		return nil, nil
	}
	// If the oldest tick is still due, so is every later one: walk forward.
	if !e.late(first, now) {
		var ticks []time.Time
		for t := first; !t.IsZero() && !t.After(now); t = e.spec.Next(t) {
			ticks = append(ticks, t)
		}
		return ticks, nil
	}
	// Otherwise walk back from now while the ticks are due: once one is
	// late, every older one is too.
	var ticks []time.Time
	for t := e.spec.Prev(now); !t.IsZero() && t.After(s.seen) && !e.late(t, now); t = e.spec.Prev(t.Add(-time.Nanosecond)) {
		ticks = append(ticks, t)
	}
	slices.Reverse(ticks)
	gap := &Gap{Schedule: e.sched.Name, After: s.seen, Before: now}
	if len(ticks) > 0 {
		gap.Before = ticks[0]
	}
	return ticks, gap
}

// Next returns the earliest tick over all schedules that is still to be
// enqueued: the caller waits until then on its own clock and calls Tick.
// Before the first successful Tick it returns the zero time (call Tick at
// once); after a failed Tick it may be in the past (call Tick again after a
// pause of the caller's choosing).
func (s *Scheduler) Next() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return time.Time{}
	}
	var next time.Time
	for _, e := range s.entries {
		if t := e.spec.Next(s.seen); !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if next.IsZero() { // no schedule ticks within five years
		next = s.seen.Add(366 * 24 * time.Hour)
	}
	return next
}
