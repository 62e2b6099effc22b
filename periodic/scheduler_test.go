package periodic_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/pebble"
	"github.com/kyuhq/kyu/periodic"
)

// t0 is a fixed start, far from the wall clock.
var t0 = date(2030, 1, 1, 10, 0, 0)

// bundle is one test's store and queue.
type bundle struct {
	t     *testing.T
	b     backend.Backend
	ctx   context.Context
	queue string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	t.Parallel()
	b, err := pebble.Open(t.TempDir(), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return &bundle{t: t, b: b, ctx: t.Context(), queue: "periodic-test"}
}

func (x *bundle) job() backend.NewJob {
	return backend.NewJob{Type: "report.build", Queue: x.queue, Payload: []byte(`{"kind":"daily"}`), Metadata: map[string]string{"team": "ops"}}
}

func (x *bundle) scheduler(opts periodic.Options, schedules ...periodic.Schedule) *periodic.Scheduler {
	x.t.Helper()
	s, err := periodic.New(x.b, schedules, opts)
	if err != nil {
		x.t.Fatalf("New: %v", err)
	}
	return s
}

func (x *bundle) tick(s *periodic.Scheduler, now time.Time) periodic.Result {
	x.t.Helper()
	res, err := s.Tick(x.ctx, now)
	if err != nil {
		x.t.Fatalf("Tick(%s): %v", now.Format(time.TimeOnly), err)
	}
	return res
}

// show renders a Result's ticks as "name@15:04:05" plus "(dup)" for duplicates.
func show(res periodic.Result) string {
	var parts []string
	for _, r := range res.Ticks {
		p := r.Schedule + "@" + r.At.UTC().Format(time.TimeOnly)
		if r.Duplicate {
			p += "(dup)"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

func (x *bundle) wantTicks(res periodic.Result, want string) {
	x.t.Helper()
	if got := show(res); got != want {
		x.t.Fatalf("Tick handled [%s]; want [%s]", got, want)
	}
}

// drain claims every job in the queue and returns each tick's key with the
// number of jobs that carry it.
func (x *bundle) drain(now time.Time) map[string]int {
	x.t.Helper()
	keys := map[string]int{}
	for {
		res, err := x.b.Claim(x.ctx, backend.ClaimParams{Queues: []string{x.queue}, Max: 100, Lease: time.Minute, WorkerID: "w", Now: now})
		if err != nil {
			x.t.Fatal(err)
		}
		if len(res.Jobs) == 0 {
			return keys
		}
		items := make([]backend.CompleteItem, 0, len(res.Jobs))
		for _, j := range res.Jobs {
			keys[j.UniqueKey]++
			items = append(items, backend.CompleteItem{Lease: backend.Lease{JobID: j.ID, Token: j.LeaseToken}})
		}
		if _, err := x.b.Complete(x.ctx, backend.CompleteParams{Items: items, Now: now}); err != nil {
			x.t.Fatal(err)
		}
	}
}

func key(name string, t time.Time) string {
	return periodic.UniqueKeyPrefix + name + ":" + t.UTC().Format(time.RFC3339Nano)
}

func TestNewValidates(t *testing.T) {
	x := setup(t)
	good := periodic.Schedule{Name: "ok", Spec: "@hourly", Job: x.job()}
	with := func(change func(*periodic.Schedule)) []periodic.Schedule {
		s := good
		s.Job = x.job()
		change(&s)
		return []periodic.Schedule{good, s}
	}
	for _, c := range []struct {
		name      string
		schedules []periodic.Schedule
		reason    string
		cause     any // a pointer to the error type behind, if any
	}{
		{"empty name", with(func(s *periodic.Schedule) { s.Name = "" }), "empty name", nil},
		{"long name", with(func(s *periodic.Schedule) { s.Name = strings.Repeat("n", periodic.MaxNameLen+1) }), "longer than", nil},
		{"same name", with(func(s *periodic.Schedule) {}), "used by schedule 0", nil},
		{"bad spec", with(func(s *periodic.Schedule) { s.Name, s.Spec = "b", "*/5 * * *" }), `spec "*/5 * * *"`, new(*periodic.SpecError)},
		{"bad catch-up", with(func(s *periodic.Schedule) { s.Name, s.CatchUp = "b", periodic.CatchUp(7) }), "catch-up", nil},
		{"run at", with(func(s *periodic.Schedule) { s.Name, s.Job.RunAt = "b", t0 }), "RunAt", nil},
		{"deadline", with(func(s *periodic.Schedule) { s.Name, s.Job.Deadline = "b", t0 }), "Deadline", nil},
		{"unique key", with(func(s *periodic.Schedule) { s.Name, s.Job.UniqueKey = "b", "k" }), "UniqueKey", nil},
		{"no type", with(func(s *periodic.Schedule) { s.Name, s.Job.Type = "b", "" }), "type: must not be empty", new(*backend.ValidationError)},
		{"bad queue", with(func(s *periodic.Schedule) { s.Name, s.Job.Queue = "b", "no spaces" }), "queue", new(*backend.ValidationError)},
	} {
		_, err := periodic.New(x.b, c.schedules, periodic.Options{})
		var se *periodic.ScheduleError
		if !errors.As(err, &se) {
			t.Errorf("%s: New = %v; want a *ScheduleError", c.name, err)
			continue
		}
		if se.Index != 1 || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: New = %q (index %d); want schedule 1 and %q", c.name, err, se.Index, c.reason)
		}
		if c.cause != nil && !errors.As(err, c.cause) {
			t.Errorf("%s: New = %v; want it to wrap a %T", c.name, err, c.cause)
		}
	}
	for _, c := range []struct {
		name string
		b    backend.Backend
		s    []periodic.Schedule
		opts periodic.Options
	}{
		{"nil backend", nil, []periodic.Schedule{good}, periodic.Options{}},
		{"no schedules", x.b, nil, periodic.Options{}},
		{"negative max payload", x.b, []periodic.Schedule{good}, periodic.Options{MaxPayload: -1}},
	} {
		if s, err := periodic.New(c.b, c.s, c.opts); err == nil {
			t.Errorf("%s: New = %v, nil; want an error", c.name, s)
		}
	}
}

func TestTickEnqueuesEachDueTick(t *testing.T) {
	x := setup(t)
	template := x.job()
	s := x.scheduler(periodic.Options{},
		periodic.Schedule{Name: "five", Spec: "*/5 * * * *", Job: template},
		periodic.Schedule{Name: "ten", Spec: "*/10 * * * * *", Job: x.job()},
	)
	if n := s.Next(); !n.IsZero() {
		t.Fatalf("Next before the first Tick = %s; want zero (tick at once)", n)
	}
	x.wantTicks(x.tick(s, t0.Add(7*time.Minute+5*time.Second)), "five@10:05:00 ten@10:07:00")
	if n := s.Next(); !n.Equal(t0.Add(7*time.Minute + 10*time.Second)) {
		t.Fatalf("Next = %s; want 10:07:10", n)
	}
	x.wantTicks(x.tick(s, t0.Add(7*time.Minute+9*time.Second)), "")
	// The caller overslept: every tick still due comes in one call.
	res := x.tick(s, t0.Add(7*time.Minute+29*time.Second))
	x.wantTicks(res, "ten@10:07:10 ten@10:07:20")
	if res.Enqueued() != 2 {
		t.Fatalf("Enqueued = %d; want 2", res.Enqueued())
	}
	res = x.tick(s, t0.Add(10*time.Minute+25*time.Second))
	x.wantTicks(res, "five@10:10:00 ten@10:10:00 ten@10:10:10 ten@10:10:20")
	// The same time again, or a clock that stepped back, does nothing.
	x.wantTicks(x.tick(s, t0.Add(10*time.Minute+25*time.Second)), "")
	x.wantTicks(x.tick(s, t0.Add(9*time.Minute)), "")

	j, err := x.b.Get(x.ctx, backend.GetParams{ID: res.Ticks[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	tick := t0.Add(10 * time.Minute)
	want := map[string]string{"team": "ops", periodic.MetaSchedule: "five", periodic.MetaTick: "2030-01-01T10:10:00Z"}
	if j.UniqueKey != key("five", tick) || j.UniqueFor != 10*time.Minute || j.Type != "report.build" ||
		string(j.Payload) != `{"kind":"daily"}` || fmt.Sprint(j.Metadata) != fmt.Sprint(want) {
		t.Fatalf("job = key %q, unique for %s, type %q, payload %q, metadata %v; want key %q, 10m (twice the period), the template's fields and metadata %v",
			j.UniqueKey, j.UniqueFor, j.Type, j.Payload, j.Metadata, key("five", tick), want)
	}
	if len(template.Metadata) != 1 {
		t.Fatalf("the caller's template metadata changed: %v", template.Metadata)
	}
	if got := x.drain(t0.Add(11 * time.Minute)); len(got) != 8 {
		t.Fatalf("the queue holds %d distinct ticks (%v); want 8", len(got), got)
	}
}

func TestUniqueForCoversThePeriod(t *testing.T) {
	x := setup(t)
	s := x.scheduler(periodic.Options{},
		periodic.Schedule{Name: "weekdays", Spec: "0 9 * * MON-FRI", Job: x.job()},
		periodic.Schedule{Name: "seconds", Spec: "*/2 * * * * *", Job: x.job()},
	)
	friday := date(2030, 1, 4, 9, 0, 0)
	res := x.tick(s, friday.Add(time.Second))
	want := map[string]time.Duration{"weekdays": 2 * 3 * 24 * time.Hour, "seconds": time.Minute}
	for _, r := range res.Ticks {
		j, err := x.b.Get(x.ctx, backend.GetParams{ID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		if j.UniqueFor != want[r.Schedule] {
			t.Errorf("%s tick at %s holds its key %s; want %s", r.Schedule, r.At, j.UniqueFor, want[r.Schedule])
		}
	}
	if len(res.Ticks) != 2 {
		t.Fatalf("Tick handled [%s]; want one tick of each", show(res))
	}
}

func TestCatchUpPolicies(t *testing.T) {
	x := setup(t)
	last := periodic.Schedule{Name: "last", Spec: "*/5 * * * *", Job: x.job()}
	none := periodic.Schedule{Name: "none", Spec: "*/5 * * * *", Job: x.job(), CatchUp: periodic.CatchUpNone}
	s := x.scheduler(periodic.Options{}, last, none)
	x.wantTicks(x.tick(s, t0.Add(7*time.Minute)), "last@10:05:00")
	x.wantTicks(x.tick(s, t0.Add(10*time.Minute)), "last@10:10:00 none@10:10:00")

	// CatchUpNone counts a tick exactly at the first Tick as due.
	onTick := periodic.Schedule{Name: "on-tick", Spec: "*/5 * * * *", Job: x.job(), CatchUp: periodic.CatchUpNone}
	x.wantTicks(x.tick(x.scheduler(periodic.Options{}, onTick), t0.Add(15*time.Minute)), "on-tick@10:15:00")

	if periodic.CatchUpLast.String() != "last" || periodic.CatchUpNone.String() != "none" {
		t.Fatalf("policy names = %s, %s", periodic.CatchUpLast, periodic.CatchUpNone)
	}
}

func TestRestartEnqueuesLastMissedTickOnce(t *testing.T) {
	x := setup(t)
	schedules := []periodic.Schedule{
		{Name: "five", Spec: "*/5 * * * *", Job: x.job()},
		{Name: "hourly", Spec: "@hourly", Job: x.job()},
	}
	first := x.scheduler(periodic.Options{}, schedules...)
	for d := time.Duration(0); d <= 20*time.Minute; d += 30 * time.Second {
		x.tick(first, t0.Add(d))
	}
	// Restarting at once enqueues nothing new.
	x.wantTicks(x.tick(x.scheduler(periodic.Options{}, schedules...), t0.Add(20*time.Minute+10*time.Second)),
		"five@10:20:00(dup) hourly@10:00:00(dup)")
	// Down until 11:47: 10:25 ... 11:45 and 11:00 were missed.
	restarted := x.scheduler(periodic.Options{}, schedules...)
	x.wantTicks(x.tick(restarted, t0.Add(107*time.Minute)), "five@11:45:00 hourly@11:00:00")
	x.wantTicks(x.tick(x.scheduler(periodic.Options{}, schedules...), t0.Add(108*time.Minute)), "five@11:45:00(dup) hourly@11:00:00(dup)")
	x.wantTicks(x.tick(restarted, t0.Add(110*time.Minute)), "five@11:50:00")

	keys := x.drain(t0.Add(110 * time.Minute))
	var ticks []string
	for k, n := range keys {
		if n != 1 {
			t.Errorf("%d jobs with key %s; want 1", n, k)
		}
		ticks = append(ticks, strings.TrimPrefix(k, periodic.UniqueKeyPrefix))
	}
	slices.Sort(ticks)
	want := []string{
		"five:2030-01-01T10:00:00Z", "five:2030-01-01T10:05:00Z", "five:2030-01-01T10:10:00Z", "five:2030-01-01T10:15:00Z",
		"five:2030-01-01T10:20:00Z", "five:2030-01-01T11:45:00Z", "five:2030-01-01T11:50:00Z",
		"hourly:2030-01-01T10:00:00Z", "hourly:2030-01-01T11:00:00Z",
	}
	if !slices.Equal(ticks, want) {
		t.Fatalf("ticks enqueued = %v; want %v", ticks, want)
	}
}

func TestEveryAgreesAcrossSchedulers(t *testing.T) {
	x := setup(t)
	every := periodic.Schedule{Name: "every", Spec: "@every 90s", Job: x.job()}
	a := x.scheduler(periodic.Options{}, every)
	b := x.scheduler(periodic.Options{}, every)
	x.wantTicks(x.tick(a, t0.Add(7*time.Second)), "every@10:00:00")
	x.wantTicks(x.tick(a, t0.Add(2*time.Minute+50*time.Second)), "every@10:01:30")
	x.wantTicks(x.tick(b, t0.Add(3*time.Minute+41*time.Second)), "every@10:03:00")
	x.wantTicks(x.tick(a, t0.Add(3*time.Minute+42*time.Second)), "every@10:03:00(dup)")
	if !a.Next().Equal(b.Next()) || !a.Next().Equal(t0.Add(4*time.Minute+30*time.Second)) {
		t.Fatalf("Next = %s and %s; want both 10:04:30", a.Next(), b.Next())
	}
	x.wantTicks(x.tick(b, t0.Add(4*time.Minute+30*time.Second)), "every@10:04:30")
	x.wantTicks(x.tick(a, t0.Add(4*time.Minute+31*time.Second)), "every@10:04:30(dup)")
	if keys := x.drain(t0.Add(5 * time.Minute)); len(keys) != 4 {
		t.Fatalf("jobs by key = %v; want 4 ticks, one job each", keys)
	}
}

func TestLateTicksAreSkipped(t *testing.T) {
	x := setup(t)
	s := x.scheduler(periodic.Options{},
		periodic.Schedule{Name: "ten", Spec: "*/10 * * * * *", Job: x.job()},
		periodic.Schedule{Name: "five", Spec: "*/5 * * * *", Job: x.job()},
	)
	x.tick(s, t0)
	// A Tick that comes 5m05s later: a tick stays due for its period, at
	// least 30s; the older ones are skipped, and the latest always comes.
	res := x.tick(s, t0.Add(5*time.Minute+5*time.Second))
	x.wantTicks(res, "ten@10:04:40 ten@10:04:50 ten@10:05:00 five@10:05:00")
	if len(res.Skipped) != 1 || res.Skipped[0].Schedule != "ten" || !res.Skipped[0].After.Equal(t0) || !res.Skipped[0].Before.Equal(t0.Add(4*time.Minute+40*time.Second)) {
		t.Fatalf("Skipped = %+v; want the ten-second ticks between 10:00:00 and 10:04:40", res.Skipped)
	}
	// Twelve minutes later: 10:10 is more than five minutes late.
	res = x.tick(s, t0.Add(17*time.Minute))
	x.wantTicks(res, "ten@10:16:40 ten@10:16:50 ten@10:17:00 five@10:15:00")
	if len(res.Skipped) != 2 || res.Skipped[1].Schedule != "five" || !res.Skipped[1].Before.Equal(t0.Add(15*time.Minute)) {
		t.Fatalf("Skipped = %+v; want ranges of both schedules, five's before 10:15", res.Skipped)
	}
	// On time again: nothing is skipped, within the allowance nothing is lost.
	res = x.tick(s, t0.Add(17*time.Minute+29*time.Second))
	x.wantTicks(res, "ten@10:17:10 ten@10:17:20")
	if len(res.Skipped) != 0 {
		t.Fatalf("Skipped = %+v; want none", res.Skipped)
	}
}

func TestTickErrorRetriesTheSameTicks(t *testing.T) {
	x := setup(t)
	s := x.scheduler(periodic.Options{}, periodic.Schedule{Name: "five", Spec: "*/5 * * * *", Job: x.job()})
	x.tick(s, t0)
	if _, err := s.Tick(x.ctx, time.Time{}); err == nil {
		t.Fatal("Tick with the zero time succeeded; want an error")
	}
	var ve *backend.ValidationError
	if _, err := s.Tick(x.ctx, time.Time{}); !errors.As(err, &ve) {
		t.Fatalf("Tick with the zero time = %v; want a *backend.ValidationError", err)
	}
	ctx, cancel := context.WithCancel(x.ctx)
	cancel()
	x.b.Close()
	_, err := s.Tick(ctx, t0.Add(6*time.Minute))
	if err == nil {
		t.Fatal("Tick on a closed store succeeded")
	}
	if !errors.Is(err, backend.ErrClosed) && !errors.Is(err, context.Canceled) {
		t.Fatalf("Tick on a closed store = %v; want it to wrap the store's error", err)
	}
	// Nothing was marked handled: the tick is still due.
	if n := s.Next(); !n.Equal(t0.Add(5 * time.Minute)) {
		t.Fatalf("Next after a failed Tick = %s; want 10:05 again", n)
	}
}
