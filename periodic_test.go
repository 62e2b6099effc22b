package kyu_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/periodic"
)

// Two workers run the same periodic job over a simulated hour: each tick
// is enqueued exactly once, and the tick missed before they started once.
func TestPeriodicJobsEnqueuedOnce(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		clock := newFakeClock()
		clock.Advance(30 * time.Second) // 12:00:30: the 12:00 tick was missed
		c := kyu.NewClient(s, kyu.ClientConfig{Clock: clock})
		cfg := kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(context.Context, *kyu.Job) error { return nil }),
			Queues:  map[string]int{"unrelated": 1}, // the ticks stay pending, to be counted
			Periodic: []kyu.PeriodicJob{{
				Name: "minutely", Spec: "@every 1m", Type: "report", Queue: "ticks",
				Title: "minutely report", Priority: 7, MaxAttempts: 3, Tags: []string{"cron"},
			}},
			Clock:        clock,
			PollInterval: 2 * time.Millisecond,
		}
		startWorker(t, s, cfg)
		startWorker(t, s, cfg)

		ticks := func() []*kyu.Job {
			page, err := c.List(t.Context(), kyu.ListOptions{Queue: "ticks", Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			return page.Jobs
		}
		s.waitFor(t, "the missed tick", func() bool { return len(ticks()) == 1 })
		for i := 1; i <= 60; i++ {
			clock.Advance(time.Minute)
			s.waitFor(t, "the next tick", func() bool { return len(ticks()) >= i+1 })
		}
		jobs := ticks()
		if len(jobs) != 61 {
			t.Fatalf("%d jobs for 61 ticks", len(jobs))
		}
		first := time.Date(2030, time.January, 1, 12, 0, 0, 0, time.UTC)
		seen := map[time.Time]bool{}
		for _, j := range jobs {
			tick, err := time.Parse(time.RFC3339Nano, j.Metadata[periodic.MetaTick])
			if err != nil || j.Type != "report" || j.Metadata[periodic.MetaSchedule] != "minutely" || seen[tick] {
				t.Fatalf("job %+v: wrong type, schedule or tick, or a second job for its tick", j)
			}
			if j.Title != "minutely report" || j.Priority != 7 || j.MaxAttempts != 3 || len(j.Tags) != 1 || j.Tags[0] != "cron" {
				t.Fatalf("job %+v does not carry the periodic job's options", j)
			}
			if tick.Before(first) || tick.Sub(first)%time.Minute != 0 {
				t.Fatalf("tick %s is not on a minute from 12:00", tick)
			}
			seen[tick] = true
		}
	})
}

func TestPeriodicBadSpec(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	h := kyu.HandlerFunc(func(context.Context, *kyu.Job) error { return nil })
	_, err := kyu.NewWorker(s, kyu.WorkerConfig{
		Handler:  h,
		Periodic: []kyu.PeriodicJob{{Name: "broken", Spec: "61 * * * *", Type: "x"}},
	})
	var serr *periodic.ScheduleError
	if !errors.As(err, &serr) || serr.Name != "broken" {
		t.Fatalf("NewWorker with a bad spec = %v, want a ScheduleError naming it", err)
	}
}
