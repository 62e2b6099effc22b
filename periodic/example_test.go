package periodic_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/pebble"
	"github.com/kyuhq/kyu/periodic"
)

// A spec names its ticks; a time-zone prefix reads it on that zone's wall
// clock, across daylight-saving changes.
func ExampleParseSpec() {
	spec, err := periodic.ParseSpec("CRON_TZ=Europe/Paris 0 9 * * MON-FRI")
	if err != nil {
		log.Fatal(err)
	}
	t := time.Date(2030, time.March, 28, 12, 0, 0, 0, time.UTC) // a Thursday
	for range 3 {
		t = spec.Next(t)
		fmt.Println(t.Format(time.RFC3339), t.Weekday())
	}

	_, err = periodic.ParseSpec("*/5 * * *")
	fmt.Println(err)
	// Output:
	// 2030-03-29T08:00:00Z Friday
	// 2030-04-01T07:00:00Z Monday
	// 2030-04-02T07:00:00Z Tuesday
	// kyu: periodic spec "*/5 * * *": expected 5 to 6 fields, found 4: [*/5 * * *]
}

// A Scheduler enqueues a report every day at 06:00 UTC and a cleanup every
// 15 minutes. The worker calls Tick when Next says; a second process with
// the same schedules finds each tick enqueued already.
func ExampleScheduler() {
	dir, err := os.MkdirTemp("", "kyu-periodic-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	schedules := []periodic.Schedule{
		{Name: "daily-report", Spec: "0 6 * * *", Job: backend.NewJob{Type: "report.daily"}},
		{Name: "cleanup", Spec: "@every 15m", Job: backend.NewJob{Type: "cleanup"}},
	}
	a, err := periodic.New(store, schedules, periodic.Options{})
	if err != nil {
		log.Fatal(err)
	}
	b, err := periodic.New(store, schedules, periodic.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	show := func(who string, res periodic.Result) {
		for _, r := range res.Ticks {
			fmt.Printf("%s: %s at %s duplicate=%v\n", who, r.Schedule, r.At.Format("15:04"), r.Duplicate)
		}
	}

	// Process a starts at 06:07: it catches up the last tick of each schedule.
	now := time.Date(2030, time.January, 1, 6, 7, 0, 0, time.UTC)
	res, err := a.Tick(ctx, now)
	if err != nil {
		log.Fatal(err)
	}
	show("a", res)

	// Each process sleeps until its Next (here: arithmetic) and ticks.
	next := a.Next()
	fmt.Println("a: next tick at", next.Format("15:04"))
	res, err = a.Tick(ctx, next)
	if err != nil {
		log.Fatal(err)
	}
	show("a", res)
	res, err = b.Tick(ctx, next.Add(2*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	show("b", res)
	// Output:
	// a: daily-report at 06:00 duplicate=false
	// a: cleanup at 06:00 duplicate=false
	// a: next tick at 06:15
	// a: cleanup at 06:15 duplicate=false
	// b: daily-report at 06:00 duplicate=true
	// b: cleanup at 06:15 duplicate=true
}
