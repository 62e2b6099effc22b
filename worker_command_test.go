package kyu_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

// selfEntry returns the worker's registry entry, nil when not listed.
func selfEntry(t *testing.T, c *kyu.Client, id string) *kyu.WorkerInfo {
	t.Helper()
	ws, err := c.Workers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i := range ws {
		if ws[i].ID == id {
			return &ws[i]
		}
	}
	return nil
}

// TestWorkerObeysCommands: a worker told to quiet claims nothing more,
// finishes its jobs in flight and stays up; told to stop, it shuts down
// gracefully. No job is lost: the jobs in flight complete, the one
// enqueued after the quiet stays pending for another worker.
func TestWorkerObeysCommands(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := kyu.NewClient(s, kyu.ClientConfig{})
	started := make(chan string, 4)
	release := make(chan struct{})
	w := startWorker(t, s, kyu.WorkerConfig{
		Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
			started <- job.ID
			<-release
			return nil
		}),
		Queues:           map[string]int{"q": 4},
		RegistryInterval: 10 * time.Millisecond,
		PollInterval:     10 * time.Millisecond,
		Periodic:         []kyu.PeriodicJob{{Name: "hourly-report", Spec: "@hourly", Type: "report", Queue: "reports"}},
	})
	held := []string{enqueue(t, c, "hold", nil, kyu.EnqueueOptions{Queue: "q"}), enqueue(t, c, "hold", nil, kyu.EnqueueOptions{Queue: "q"})}
	recv(t, started, "first handler start")
	recv(t, started, "second handler start")
	s.waitFor(t, "the entry to list the periodic schedule and state running", func() bool {
		e := selfEntry(t, c, w.ID())
		return e != nil && e.State == backend.WorkerRunning && len(e.Periodic) == 1
	})
	p := selfEntry(t, c, w.ID()).Periodic[0]
	if p.Name != "hourly-report" || p.Spec != "@hourly" || p.Queue != "reports" || p.Type != "report" ||
		p.NextRun.Sub(p.LastRun) != time.Hour || p.NextRun.Minute() != 0 {
		t.Errorf("periodic entry = %+v; want the hourly schedule with its last and next tick an hour apart", p)
	}

	if _, err := c.QuietWorker(t.Context(), w.ID()); err != nil {
		t.Fatalf("QuietWorker: %v", err)
	}
	s.waitFor(t, "the worker to report quiet", func() bool {
		e := selfEntry(t, c, w.ID())
		return e != nil && e.State == backend.WorkerQuiet
	})
	late := enqueue(t, c, "hold", nil, kyu.EnqueueOptions{Queue: "q"})
	// Two more refreshes: the worker is up and still holds its two jobs.
	seen := selfEntry(t, c, w.ID()).LastSeen
	for range 2 {
		s.waitFor(t, "a registry refresh", func() bool {
			e := selfEntry(t, c, w.ID())
			return e != nil && e.LastSeen.After(seen)
		})
		seen = selfEntry(t, c, w.ID()).LastSeen
	}
	if e := selfEntry(t, c, w.ID()); len(e.Running) != 2 || e.State != backend.WorkerQuiet {
		t.Fatalf("quiet worker's entry = running %v, state %s; want the two held jobs, quiet", e.Running, e.State)
	}
	waitState(t, s, c, late, kyu.StatePending)
	select {
	case <-w.Done():
		t.Fatal("a quiet worker stopped")
	default:
	}
	close(release)
	for _, id := range held {
		waitState(t, s, c, id, kyu.StateCompleted)
	}

	if _, err := c.StopWorker(t.Context(), w.ID()); err != nil {
		t.Fatalf("StopWorker: %v", err)
	}
	recv(t, w.Done(), "the worker to stop on the stop command")
	if e := selfEntry(t, c, w.ID()); e != nil {
		t.Fatalf("a stopped worker is still registered: %+v", e)
	}
	if j := waitState(t, s, c, late, kyu.StatePending); j.Attempt != 0 {
		t.Fatalf("the job enqueued after the quiet ran %d attempts; want none", j.Attempt)
	}
	if _, err := c.StopWorker(t.Context(), w.ID()); !errors.Is(err, kyu.ErrNotFound) {
		t.Fatalf("StopWorker of a stopped worker = %v; want ErrNotFound", err)
	}
}

// TestWorkerStopCommandHandsJobsBack: a stop command while a job runs past
// the grace period hands the job back to pending at once.
func TestWorkerStopCommandHandsJobsBack(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := kyu.NewClient(s, kyu.ClientConfig{})
	started := make(chan struct{}, 1)
	w := startWorker(t, s, kyu.WorkerConfig{
		Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}),
		Queues:           map[string]int{"q": 1},
		RegistryInterval: 10 * time.Millisecond,
		ShutdownGrace:    10 * time.Millisecond,
	})
	id := enqueue(t, c, "hold", nil, kyu.EnqueueOptions{Queue: "q"})
	recv(t, started, "handler start")
	s.waitFor(t, "the worker to register", func() bool { return selfEntry(t, c, w.ID()) != nil })
	if _, err := c.StopWorker(t.Context(), w.ID()); err != nil {
		t.Fatalf("StopWorker: %v", err)
	}
	recv(t, w.Done(), "the worker to stop")
	if j := waitState(t, s, c, id, kyu.StatePending); j.Attempt != 0 {
		t.Fatalf("the interrupted job has attempt %d; want 0 (handed back, not counted)", j.Attempt)
	}
}

// TestWorkerOnCommand: with OnCommand set the worker leaves the command to
// the program, which hears each command once.
func TestWorkerOnCommand(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := kyu.NewClient(s, kyu.ClientConfig{})
	heard := make(chan kyu.WorkerCommand, 10)
	w := startWorker(t, s, kyu.WorkerConfig{
		Handler:          kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error { return nil }),
		Queues:           map[string]int{"q": 1},
		RegistryInterval: 10 * time.Millisecond,
		OnCommand:        func(cmd kyu.WorkerCommand) { heard <- cmd },
	})
	s.waitFor(t, "the worker to register", func() bool { return selfEntry(t, c, w.ID()) != nil })
	if _, err := c.QuietWorker(t.Context(), w.ID()); err != nil {
		t.Fatalf("QuietWorker: %v", err)
	}
	if cmd := recv(t, heard, "the quiet command"); cmd != kyu.WorkerCommandQuiet {
		t.Fatalf("OnCommand heard %q; want quiet", cmd)
	}
	if _, err := c.StopWorker(t.Context(), w.ID()); err != nil {
		t.Fatalf("StopWorker: %v", err)
	}
	if cmd := recv(t, heard, "the stop command"); cmd != kyu.WorkerCommandStop {
		t.Fatalf("OnCommand heard %q; want stop", cmd)
	}
	// The worker itself neither quieted nor stopped; it ran a job since.
	id := enqueue(t, c, "x", nil, kyu.EnqueueOptions{Queue: "q"})
	waitState(t, s, c, id, kyu.StateCompleted)
	if e := selfEntry(t, c, w.ID()); e == nil || e.State != backend.WorkerRunning {
		t.Fatalf("entry = %+v; want the worker running", e)
	}
	if len(heard) != 0 {
		t.Fatalf("OnCommand heard %q more; want each command once", <-heard)
	}
	w.Quiet()
	s.waitFor(t, "the worker to report quiet after Quiet", func() bool {
		e := selfEntry(t, c, w.ID())
		return e != nil && e.State == backend.WorkerQuiet
	})
}
