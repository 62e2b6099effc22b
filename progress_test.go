package kyu_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kyuhq/kyu"
)

func TestProgressAndLogRoundTrip(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		handlerCtx := make(chan context.Context, 1)
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				for _, err := range []error{
					kyu.Progress(ctx, 10, "starting"),
					kyu.Log(ctx, "fetched 3 pages"),
					kyu.Logf(ctx, "wrote %d rows", 42),
					kyu.Progress(ctx, 100, "done"),
				} {
					if err != nil {
						return kyu.Permanent(err)
					}
				}
				var verr *kyu.ValidationError
				if err := kyu.Progress(ctx, 101, ""); !errors.As(err, &verr) || verr.Field != "progress" {
					return kyu.Permanent(fmt.Errorf("progress of 101%%: %v, want a ValidationError", err))
				}
				if err := kyu.Log(ctx, "\xff"); !errors.As(err, &verr) || verr.Field != "logs" {
					return kyu.Permanent(fmt.Errorf("a line of invalid UTF-8: %v, want a ValidationError", err))
				}
				handlerCtx <- ctx
				return nil
			}),
		})
		id := enqueue(t, c, "report", nil, kyu.EnqueueOptions{})
		job := waitState(t, s, c, id, kyu.StateCompleted)
		if p := job.Progress; p == nil || p.Percent != 100 || p.Message != "done" || p.At.IsZero() {
			t.Errorf("progress = %+v, want 100%% \"done\" with its time", p)
		}
		var lines []string
		for _, l := range job.Logs {
			if l.At.IsZero() {
				t.Errorf("line %q has no time", l.Line)
			}
			lines = append(lines, l.Line)
		}
		if got, want := strings.Join(lines, "|"), "fetched 3 pages|wrote 42 rows"; got != want {
			t.Errorf("logs = %q, want %q", got, want)
		}
		if job.LogsDropped != 0 {
			t.Errorf("logs dropped = %d, want 0", job.LogsDropped)
		}

		// Once the handler has returned, its context no longer reports.
		ctx := recv(t, handlerCtx, "the handler's context")
		if err := kyu.Log(ctx, "too late"); !errors.Is(err, kyu.ErrNotInHandler) {
			t.Errorf("Log after the handler returned = %v, want ErrNotInHandler", err)
		}
	})
}

func TestProgressOutsideHandler(t *testing.T) {
	t.Parallel()
	if err := kyu.Progress(t.Context(), 50, "half"); !errors.Is(err, kyu.ErrNotInHandler) {
		t.Errorf("Progress = %v, want ErrNotInHandler", err)
	}
	if err := kyu.Log(t.Context(), "line"); !errors.Is(err, kyu.ErrNotInHandler) {
		t.Errorf("Log = %v, want ErrNotInHandler", err)
	}
}

// TestSetResultOutsideHandler: a Job no handler runs (from Client.Get, or
// built by hand) refuses a result instead of dropping it silently.
func TestSetResultOutsideHandler(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := kyu.NewClient(s, kyu.ClientConfig{})
	id := enqueue(t, c, "t", nil, kyu.EnqueueOptions{})
	got, err := c.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range []*kyu.Job{got, {ID: "by-hand"}} {
		if err := job.SetResult([]byte("r")); !errors.Is(err, kyu.ErrNotInHandler) {
			t.Errorf("SetResult on job %s = %v, want ErrNotInHandler", job.ID, err)
		}
		if err := job.SetResultJSON("r"); !errors.Is(err, kyu.ErrNotInHandler) {
			t.Errorf("SetResultJSON on job %s = %v, want ErrNotInHandler", job.ID, err)
		}
	}
}

// Reports are visible while the handler still runs.
func TestProgressVisibleWhileRunning(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		release := make(chan struct{})
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				if err := kyu.Progress(ctx, 50, "halfway"); err != nil {
					return err
				}
				if err := kyu.Log(ctx, "first half done"); err != nil {
					return err
				}
				<-release
				return nil
			}),
		})
		defer close(release)
		id := enqueue(t, c, "long", nil, kyu.EnqueueOptions{})
		s.waitFor(t, "progress of the running job", func() bool {
			job, err := c.Get(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			return job.State == kyu.StateActive && job.Progress != nil && job.Progress.Percent == 50 &&
				len(job.Logs) == 1 && job.Logs[0].Line == "first half done"
		})
	})
}

func TestLogCap(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		var logs logBuffer
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				for i := range 5 {
					if err := kyu.Logf(ctx, "line %d", i); err != nil {
						return kyu.Permanent(err)
					}
				}
				return nil
			}),
			MaxLogLines: 3,
			Logger:      logs.logger(),
		})
		id := enqueue(t, c, "chatty", nil, kyu.EnqueueOptions{})
		job := waitState(t, s, c, id, kyu.StateCompleted)
		if len(job.Logs) != 3 || job.Logs[0].Line != "line 0" || job.Logs[2].Line != "line 2" || job.LogsDropped != 2 {
			t.Fatalf("logs = %+v, dropped %d; want lines 0-2 and 2 dropped", job.Logs, job.LogsDropped)
		}
		if n := strings.Count(logs.String(), "log is full"); n != 1 {
			t.Errorf("the cap was stated %d times in the worker's log, want once:\n%s", n, logs.String())
		}
	})
}

// A job handed back at shutdown keeps what its handler logged: lines and
// progress persist across attempts.
func TestLogsKeptWhenJobHandedBack(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		logged := make(chan struct{}, 1)
		w := startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				if err := kyu.Log(ctx, "got halfway"); err != nil {
					return err
				}
				logged <- struct{}{}
				<-ctx.Done()
				return ctx.Err()
			}),
			ShutdownGrace: kyu.NoShutdownGrace,
		})
		id := enqueue(t, c, "interrupted", nil, kyu.EnqueueOptions{})
		recv(t, logged, "the handler to log")
		if err := w.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		job, err := c.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if job.State != kyu.StatePending || len(job.Logs) != 1 || job.Logs[0].Line != "got halfway" {
			t.Fatalf("job is %s with logs %+v; want pending with the line logged", job.State, job.Logs)
		}
	})
}
