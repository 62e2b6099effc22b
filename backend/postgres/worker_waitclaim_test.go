package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

// An idle worker's job is claimed in the commit of its enqueue: it is
// active the moment Enqueue returns, before any wake-up could have made
// the worker claim it (its handler holds it active until the test has
// looked).
func TestWorkerIdleJobClaimedInEnqueueCommit(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	started := make(chan string, 1)
	finish := make(chan struct{})
	w, err := kyu.NewWorker(s, kyu.WorkerConfig{
		Queues: map[string]int{"q": 2},
		Handler: kyu.HandlerFunc(func(_ context.Context, j *kyu.Job) error {
			started <- j.ID
			<-finish
			return nil
		}),
		PollInterval:  time.Hour,
		ShutdownGrace: kyu.NoShutdownGrace,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Shutdown(context.Background()) })
	c := kyu.NewClient(s, kyu.ClientConfig{})
	for i := range 5 {
		awaitWaiting(t, s, 1)
		res, err := c.Enqueue(t.Context(), "t", nil, kyu.EnqueueOptions{Queue: "q"})
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := rowVersion(t, s, res.ID); st != "active" {
			t.Fatalf("job %d is %s when Enqueue returns; want active", i, st)
		}
		select {
		case id := <-started:
			if id != res.ID {
				t.Fatalf("ran %s; want %s", id, res.ID)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("job %d did not start", i)
		}
		finish <- struct{}{}
		deadline := time.Now().Add(30 * time.Second)
		for st, _ := rowVersion(t, s, res.ID); st != "completed"; st, _ = rowVersion(t, s, res.ID) {
			if time.Now().After(deadline) {
				t.Fatalf("job %d is %s; want completed", i, st)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// Killing the store's connections while enqueues fill an idle worker's
// waiting claims loses no job and leaves none active for good: every job
// written ends completed (a claim whose commit's answer was lost comes
// back when its lease expires), and every enqueue that succeeded ran.
func TestFaultTerminateDuringFill(t *testing.T) {
	t.Parallel()
	app := "kyu_fill_" + testSchemaName(t)[len("kyu_test_"):]
	s := openTestStore(t, Options{MaxConns: 4, ApplicationName: app})
	tracker := newExecTracker()
	w, err := kyu.NewWorker(s, kyu.WorkerConfig{
		Queues:              map[string]int{"fill": 2},
		Handler:             tracker.handler(time.Millisecond),
		Lease:               2 * time.Second,
		PollInterval:        200 * time.Millisecond,
		MaintenanceInterval: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Shutdown(context.Background()) })
	admin, err := pgx.Connect(t.Context(), testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())

	var ok []string
	var killed int64
	for i := range 30 {
		awaitWaiting(t, s, 1)
		kill := make(chan int64, 1)
		go func() {
			time.Sleep(time.Duration(i%6) * 150 * time.Microsecond)
			var n int64
			if err := admin.QueryRow(context.Background(),
				`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
				t.Errorf("terminate: %v", err)
			}
			kill <- n
		}()
		res, err := s.Enqueue(t.Context(), backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{{Type: "t", Queue: "fill"}}})
		if err == nil {
			ok = append(ok, res.Jobs[0].ID)
		}
		killed += <-kill
	}
	if killed == 0 {
		t.Fatal("no connection of the store was terminated; the test proved nothing")
	}
	count := func(ctx context.Context) (int, error) {
		var n int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM `+s.schema+`.jobs WHERE state <> 'completed'`).Scan(&n)
		return n, err
	}
	waitCompleted(t, count, 0, 60*time.Second)
	tracker.check(t, ok)
	t.Logf("%d of 30 enqueues succeeded; %d connections terminated", len(ok), killed)
}
