package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/periodic"
)

// periodicProc is one simulated worker process running a periodic.Scheduler
// with its own clock, skewed from the simulation's real time.
type periodicProc struct {
	name     string
	s        *periodic.Scheduler
	skew     time.Duration   // the process's clock minus real time
	steps    []time.Duration // uneven pauses between calls; nil: wake at Next
	jit      []time.Duration // for a Next-driven process, how late it wakes
	stall    int             // after this many calls, the process stalls...
	stallFor time.Duration   // ...for this long (its next call catches up)
	i        int
	wake     time.Time // real time of the next Tick
	first    time.Time // the process's clock at its first Tick
	last     time.Time // the process's clock at its latest Tick
	won      int       // ticks this process enqueued first
}

// plan sets the real time of p's next Tick after one at real time r.
func (p *periodicProc) plan(t *testing.T, r time.Time) {
	t.Helper()
	defer func() {
		if p.i == p.stall {
			p.wake = p.wake.Add(p.stallFor)
		}
		p.i++
	}()
	if p.steps != nil {
		p.wake = r.Add(p.steps[p.i%len(p.steps)])
		return
	}
	next := p.s.Next()
	if next.IsZero() {
		t.Fatalf("%s: Next after a successful Tick is the zero time", p.name)
	}
	p.wake = next.Add(-p.skew).Add(p.jit[p.i%len(p.jit)])
	if !p.wake.After(r) {
		t.Fatalf("%s: Next = %s is not after the Tick at %s (its clock)", p.name, stamp(next), stamp(r.Add(p.skew)))
	}
}

// periodicJob is the template of a schedule in the suite's queue.
func (f *fixture) periodicJob(title string, keep backend.Retention) backend.NewJob {
	return f.fill(backend.NewJob{Title: title, Retention: keep})
}

// periodicDrain claims and completes every claimable job of f.queue at
// f.now, runs retention, and returns the claimed jobs.
func (f *fixture) periodicDrain() []*backend.Job {
	f.t.Helper()
	var all []*backend.Job
	for {
		jobs := f.claim(100)
		if len(jobs) == 0 {
			break
		}
		for _, j := range jobs {
			f.mustOK("Complete of periodic job "+j.ID, f.complete(lease(j), nil))
		}
		all = append(all, jobs...)
	}
	f.applyRetention()
	return all
}

// newPeriodicScheduler builds a Scheduler over f's store or fails the test.
func (f *fixture) newPeriodicScheduler(schedules []periodic.Schedule) *periodic.Scheduler {
	f.t.Helper()
	s, err := periodic.New(f.b, schedules, periodic.Options{})
	if err != nil {
		f.t.Fatalf("periodic.New: %v", err)
	}
	return s
}

// periodicTick calls s.Tick at the process's clock now and fails the test on error.
func (f *fixture) periodicTick(s *periodic.Scheduler, now time.Time) periodic.Result {
	f.t.Helper()
	res, err := s.Tick(f.ctx, now)
	if err != nil {
		f.t.Fatalf("Tick at %s: %v", stamp(now), err)
	}
	return res
}

func testPeriodic(t *testing.T, factory Factory) {
	t.Run("TwoProcessesOneHour", func(t *testing.T) {
		f := start(t, factory)
		schedules := func() []periodic.Schedule {
			return []periodic.Schedule{
				{Name: "five-minutes", Spec: "*/5 * * * *", Job: f.periodicJob("five minutes", 0)},
				{Name: "ninety-seconds", Spec: "@every 90s", Job: f.periodicJob("ninety seconds", 0)},
				// Deleted when it completes: its key must hold all the same.
				{Name: "ten-seconds", Spec: "*/10 * * * * *", Job: f.periodicJob("ten seconds", backend.RetainNone)},
			}
		}
		procs := []*periodicProc{
			// A is ahead, so it mostly wins; when it wakes late or stalls, B
			// (behind, stepping unevenly, never more than the 30s a tick
			// stays due) enqueues the ticks first. After its stall A finds
			// the older ticks late and skips them, the later ones duplicates.
			{name: "process A (clock 4s ahead, wakes at Next)", s: f.newPeriodicScheduler(schedules()), skew: 4 * time.Second,
				jit:   []time.Duration{0, 250 * time.Millisecond, 9 * time.Second, 1500 * time.Millisecond, 40 * time.Millisecond, 6 * time.Second, 12 * time.Second},
				stall: 150, stallFor: 7 * time.Minute},
			{name: "process B (clock 3s behind, uneven steps)", s: f.newPeriodicScheduler(schedules()), skew: -3 * time.Second,
				steps: []time.Duration{7 * time.Second, 13 * time.Second, 2 * time.Second, 23 * time.Second, time.Second, 19500 * time.Millisecond, 11 * time.Second}},
		}
		for _, p := range procs {
			p.wake = t0
		}
		end := t0.Add(time.Hour)

		fresh := map[string]int{}        // tick key -> new jobs written for it
		holder := map[string]string{}    // tick key -> job id
		claimed := map[string]int{}      // tick key -> times claimed
		tickOf := map[string]time.Time{} // tick key -> tick
		schedOf := map[string]string{}   // tick key -> schedule name
		duplicates := 0
		record := func(p *periodicProc, res periodic.Result) {
			for _, r := range res.Ticks {
				key := periodic.UniqueKeyPrefix + r.Schedule + ":" + r.At.UTC().Format(time.RFC3339Nano)
				if r.At.After(p.last) {
					t.Fatalf("%s enqueued tick %s of %s at its clock %s, before the tick", p.name, stamp(r.At), r.Schedule, stamp(p.last))
				}
				if id, ok := holder[key]; ok && id != r.ID {
					t.Fatalf("tick %s of %s has two jobs: %s and %s", stamp(r.At), r.Schedule, id, r.ID)
				}
				holder[key], tickOf[key], schedOf[key] = r.ID, r.At, r.Schedule
				if r.Duplicate {
					duplicates++
				} else {
					fresh[key]++
					p.won++
				}
			}
		}
		for {
			p := procs[0]
			for _, q := range procs[1:] {
				if q.wake.Before(p.wake) {
					p = q
				}
			}
			if p.wake.After(end) {
				break
			}
			rt := p.wake
			now := rt.Add(p.skew)
			if p.first.IsZero() {
				p.first = now
			}
			p.last = now
			record(p, f.periodicTick(p.s, now))
			// A consumer works the queue as it goes, and finished jobs are
			// pruned: a pruned tick must not be enqueued again.
			f.now = rt
			for _, j := range f.periodicDrain() {
				claimed[j.UniqueKey]++
			}
			p.plan(t, rt)
		}

		// Every tick from the earliest catch-up to the latest clock, once.
		expected := 0
		for _, sc := range schedules() {
			spec, err := periodic.ParseSpec(sc.Spec)
			if err != nil {
				t.Fatalf("ParseSpec(%q): %v", sc.Spec, err)
			}
			from, to := time.Time{}, time.Time{}
			for _, p := range procs {
				if c := spec.Prev(p.first); from.IsZero() || c.Before(from) {
					from = c
				}
				if to.IsZero() || p.last.After(to) {
					to = p.last
				}
			}
			for tick := from; !tick.After(to); tick = spec.Next(tick) {
				expected++
				key := periodic.UniqueKeyPrefix + sc.Name + ":" + tick.UTC().Format(time.RFC3339Nano)
				if fresh[key] != 1 || claimed[key] != 1 {
					t.Errorf("tick %s of %s: enqueued as new %d times, claimed %d times; want once each", stamp(tick), sc.Name, fresh[key], claimed[key])
				}
				delete(fresh, key)
				delete(claimed, key)
			}
		}
		for key, n := range fresh {
			t.Errorf("unexpected tick %s (key %q) enqueued %d times", stamp(tickOf[key]), key, n)
		}
		for key, n := range claimed {
			t.Errorf("unexpected job with key %q claimed %d times", key, n)
		}
		if expected < 12+40+360 {
			t.Fatalf("the hour held %d ticks; want at least %d", expected, 12+40+360)
		}
		if duplicates == 0 {
			t.Fatal("no Tick reported a duplicate: the two processes never raced for a tick, so the test shows nothing")
		}
		for _, p := range procs {
			t.Logf("%s: %d Tick calls won %d of %d ticks", p.name, p.i, p.won, expected)
			if p.won == 0 {
				t.Fatalf("%s enqueued no tick first: the processes did not take turns, so the test shows little", p.name)
			}
		}
		f.now = end
		f.claimNothing("every tick was claimed once as it fell due")

		// What was enqueued is what the schedule says, and the keys still
		// hold after the jobs completed (the ten-second ones were deleted).
		// Probe the latest tick of each schedule: enqueued less than a
		// period ago, its key must hold, also for the deleted ten-second job.
		latest := map[string]string{} // schedule -> key of its latest tick
		for key := range holder {
			if l, ok := latest[schedOf[key]]; !ok || tickOf[key].After(tickOf[l]) {
				latest[schedOf[key]] = key
			}
		}
		if len(latest) != 3 {
			t.Fatalf("ticks of schedules %v; want all three", latest)
		}
		for _, key := range latest {
			f.wantDuplicate(backend.NewJob{UniqueKey: key}, holder[key], "a tick's key is held after its job finished (and, for ten-seconds, was deleted)")
		}
		kept := 0
		for key, id := range holder {
			j, err := f.b.Get(f.ctx, backend.GetParams{ID: id})
			if errors.Is(err, backend.ErrNotFound) && schedOf[key] == "ten-seconds" {
				continue // deleted when it completed
			}
			if err != nil {
				t.Fatalf("Get(%s) of tick %s: %v", id, key, err)
			}
			kept++
			// RunAt was the tick, in the past by enqueue: the store ran it at once.
			if j.UniqueKey != key || j.RunAt.Before(tickOf[key]) || j.Metadata[periodic.MetaTick] != tickOf[key].UTC().Format(time.RFC3339Nano) ||
				j.Metadata[periodic.MetaSchedule] != schedOf[key] {
				t.Errorf("job %s = key %q, run_at %s, metadata %v; want key %q, run_at from %s, metadata naming %s and the tick",
					id, j.UniqueKey, stamp(j.RunAt), j.Metadata, key, stamp(tickOf[key]), schedOf[key])
			}
			if j.UniqueFor < time.Minute {
				t.Errorf("job %s holds its key for %s; want at least a minute", id, j.UniqueFor)
			}
		}
		if kept < 12+40 {
			t.Fatalf("read back %d kept jobs; want the five-minutes and ninety-seconds ones, at least %d", kept, 12+40)
		}
	})

	t.Run("MissedTickAtRestart", func(t *testing.T) {
		f := start(t, factory)
		schedules := []periodic.Schedule{
			{Name: "five-minutes", Spec: "0 */5 * * * *", Job: f.periodicJob("five minutes", backend.RetainNone)},
			{Name: "ninety-seconds", Spec: "@every 90s", Job: f.periodicJob("ninety seconds", backend.RetainNone)},
		}
		first := f.newPeriodicScheduler(schedules)
		seen := map[string]string{}
		for d := time.Duration(0); d <= 20*time.Minute; d += 10 * time.Second {
			for _, r := range f.periodicTick(first, f.at(d)).Ticks {
				if r.Duplicate {
					t.Fatalf("the only process got a duplicate for tick %s of %s", stamp(r.At), r.Schedule)
				}
				seen[r.Schedule+" "+stamp(r.At)] = r.ID
			}
		}
		f.periodicDrain() // the ticks ran and were pruned

		// A restart right away: the latest ticks were enqueued already.
		res := f.periodicTick(f.newPeriodicScheduler(schedules), f.at(20*time.Minute+5*time.Second))
		if len(res.Ticks) != 2 {
			t.Fatalf("a restart with no missed tick handled %+v; want the latest tick of each schedule", res.Ticks)
		}
		for _, r := range res.Ticks {
			id, ok := seen[r.Schedule+" "+stamp(r.At)]
			if !r.Duplicate || !ok || r.ID != id {
				t.Fatalf("a restart re-handled tick %s of %s as %+v; want a duplicate of %s (enqueued before the restart, then run and pruned)", stamp(r.At), r.Schedule, r, id)
			}
		}

		// Down from 20m05s to 47m10s: ticks 25m..45m and 21m..46m30s were
		// missed; the restart enqueues the latest of each, once.
		restarted := f.newPeriodicScheduler(schedules)
		res = f.periodicTick(restarted, f.at(47*time.Minute+10*time.Second))
		want := map[string]time.Time{"five-minutes": t0.Add(45 * time.Minute), "ninety-seconds": t0.Add(46*time.Minute + 30*time.Second)}
		if len(res.Ticks) != len(want) {
			t.Fatalf("restart after downtime handled %d ticks (%+v); want the last missed tick of each schedule", len(res.Ticks), res.Ticks)
		}
		ids := map[string]string{}
		for _, r := range res.Ticks {
			if !sameTime(r.At, want[r.Schedule]) || r.Duplicate {
				t.Fatalf("restart after downtime handled %s of %s (duplicate %v); want the new tick %s", stamp(r.At), r.Schedule, r.Duplicate, stamp(want[r.Schedule]))
			}
			ids[r.Schedule] = r.ID
		}
		// Another process starting just after, and a late Tick of the
		// restarted one, must not enqueue them again.
		for _, r := range f.periodicTick(f.newPeriodicScheduler(schedules), f.at(47*time.Minute+12*time.Second)).Ticks {
			if !r.Duplicate || r.ID != ids[r.Schedule] {
				t.Fatalf("a second process starting after the restart handled %s of %s as %+v; want a duplicate of %s", stamp(r.At), r.Schedule, r, ids[r.Schedule])
			}
		}
		if res := f.periodicTick(restarted, f.at(47*time.Minute+20*time.Second)); len(res.Ticks) != 0 {
			t.Fatalf("a Tick with no new tick due handled %+v; want nothing", res.Ticks)
		}
		jobs := f.periodicDrain()
		if len(jobs) != 2 {
			t.Fatalf("after the restart %d jobs ran; want 2 (the last missed tick of each schedule)", len(jobs))
		}
		// The next tick comes on time.
		if next := restarted.Next(); !sameTime(next, t0.Add(48*time.Minute)) {
			t.Fatalf("Next after the restart = %s; want t0+48m (ninety-seconds)", stamp(next))
		}
	})
}
