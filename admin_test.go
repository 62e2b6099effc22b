package kyu_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kyuhq/kyu"
)

const unknownID = "0190d9b2-0000-7000-8000-000000000000"

// enqueueN enqueues n jobs of one attempt into queue.
func enqueueN(t *testing.T, c *kyu.Client, queue string, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		ids = append(ids, enqueue(t, c, "x", nil, kyu.EnqueueOptions{Queue: queue, MaxAttempts: 1}))
	}
	return ids
}

func TestAdminRetryAndRunNow(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		w := startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				if job.Attempt == 1 {
					return kyu.Permanent(errors.New("first try fails"))
				}
				return nil
			}),
			Queues: map[string]int{"admin": 1},
		})
		id := enqueue(t, c, "x", nil, kyu.EnqueueOptions{Queue: "admin", MaxAttempts: 1})
		waitState(t, s, c, id, kyu.StateFailed)

		job, err := c.Retry(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if job.State != kyu.StatePending || job.Attempt != 1 || job.MaxAttempts < 2 {
			t.Fatalf("retried job is %s at attempt %d of %d", job.State, job.Attempt, job.MaxAttempts)
		}
		if job := waitState(t, s, c, id, kyu.StateCompleted); job.Attempt != 2 {
			t.Errorf("completed at attempt %d, want 2", job.Attempt)
		}
		if _, err := c.Retry(t.Context(), id); !errors.Is(err, kyu.ErrWrongState) {
			t.Errorf("Retry of a completed job = %v, want ErrWrongState", err)
		}
		if _, err := c.Retry(t.Context(), unknownID); !errors.Is(err, kyu.ErrNotFound) {
			t.Errorf("Retry of an unknown id = %v, want ErrNotFound", err)
		}

		// RunNow: a job scheduled for next year runs now.
		later := enqueue(t, c, "x", nil, kyu.EnqueueOptions{Queue: "admin", Delay: 365 * 24 * time.Hour, MaxAttempts: 1})
		if _, err := c.RunNow(t.Context(), id); !errors.Is(err, kyu.ErrWrongState) {
			t.Errorf("RunNow of a completed job = %v, want ErrWrongState", err)
		}
		job, err = c.RunNow(t.Context(), later)
		if err != nil {
			t.Fatal(err)
		}
		if job.State != kyu.StatePending {
			t.Fatalf("after RunNow the job is %s", job.State)
		}
		waitState(t, s, c, later, kyu.StateFailed)
		synctest.Wait()
		if st := w.Stats(); st.Failed != 2 {
			t.Errorf("stats = %+v, want both failures counted", st)
		}
	})
}

func TestAdminDeleteAndPurge(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		started := make(chan struct{}, 1)
		release := make(chan struct{})
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				started <- struct{}{}
				<-release
				return nil
			}),
			Queues: map[string]int{"busy": 1},
		})
		defer close(release)
		active := enqueue(t, c, "x", nil, kyu.EnqueueOptions{Queue: "busy"})
		recv(t, started, "handler start")
		if err := c.Delete(t.Context(), active); !errors.Is(err, kyu.ErrJobActive) {
			t.Errorf("Delete of an active job = %v, want ErrJobActive", err)
		}
		if err := c.Delete(t.Context(), unknownID); !errors.Is(err, kyu.ErrNotFound) {
			t.Errorf("Delete of an unknown id = %v, want ErrNotFound", err)
		}
		var verr *kyu.ValidationError
		if _, err := c.Purge(t.Context(), "busy", kyu.StateActive); !errors.As(err, &verr) {
			t.Errorf("Purge of active jobs = %v, want a ValidationError", err)
		}

		// Pending jobs of an unserved queue: delete one, purge the rest.
		ids := enqueueN(t, c, "idle", 5)
		if err := c.Delete(t.Context(), ids[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(t.Context(), ids[0]); !errors.Is(err, kyu.ErrNotFound) {
			t.Errorf("Get after Delete = %v, want ErrNotFound", err)
		}
		n, err := c.Purge(t.Context(), "idle", kyu.StatePending)
		if err != nil || n != 4 {
			t.Fatalf("Purge = %d, %v; want 4", n, err)
		}
		if job, err := c.Get(t.Context(), active); err != nil || job.State != kyu.StateActive {
			t.Fatalf("the active job of another queue: %v, %v", job, err)
		}
	})
}

func TestAdminRetryFailed(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		w := startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				if job.Attempt == 1 {
					return errors.New("first try fails")
				}
				return nil
			}),
			Queues: map[string]int{"flaky": 4},
		})
		ids := enqueueN(t, c, "flaky", 6)
		for _, id := range ids {
			waitState(t, s, c, id, kyu.StateFailed)
		}
		n, err := c.RetryFailed(t.Context(), "flaky")
		if err != nil || n != 6 {
			t.Fatalf("RetryFailed = %d, %v; want 6", n, err)
		}
		for _, id := range ids {
			waitState(t, s, c, id, kyu.StateCompleted)
		}
		synctest.Wait()
		if st := w.Stats(); st.Succeeded != 6 || st.Failed != 6 {
			t.Errorf("stats = %+v, want 6 succeeded and 6 failed", st)
		}
		if n, err := c.RetryFailed(t.Context(), "flaky"); err != nil || n != 0 {
			t.Errorf("RetryFailed with nothing failed = %d, %v; want 0", n, err)
		}
		var verr *kyu.ValidationError
		if _, err := c.RetryFailed(t.Context(), "no spaces"); !errors.As(err, &verr) {
			t.Errorf("RetryFailed of a bad queue name = %v, want a ValidationError", err)
		}
	})
}

// A paused queue hands nothing out; another queue of the same worker goes
// on, and resuming the paused one lets its job run.
func TestPauseQueue(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		settings, err := c.PauseQueue(t.Context(), "held")
		if err != nil {
			t.Fatal(err)
		}
		if !settings.Paused {
			t.Fatalf("settings after PauseQueue = %+v", settings)
		}
		held := enqueue(t, c, "x", nil, kyu.EnqueueOptions{Queue: "held"})
		startWorker(t, s, kyu.WorkerConfig{
			Handler:      kyu.HandlerFunc(func(context.Context, *kyu.Job) error { return nil }),
			Queues:       map[string]int{"held": 1, "free": 1},
			PollInterval: 5 * time.Millisecond,
		})
		// Two jobs of the other queue, one after the other: by the time the
		// second is done the worker has polled the paused queue many times.
		for range 2 {
			waitState(t, s, c, enqueue(t, c, "x", nil, kyu.EnqueueOptions{Queue: "free"}), kyu.StateCompleted)
		}
		if job, err := c.Get(t.Context(), held); err != nil || job.State != kyu.StatePending {
			t.Fatalf("the paused queue's job: %v, %v; want pending", job, err)
		}
		if settings, err := c.ResumeQueue(t.Context(), "held"); err != nil || settings.Paused {
			t.Fatalf("ResumeQueue = %+v, %v", settings, err)
		}
		waitState(t, s, c, held, kyu.StateCompleted)
	})
}

func TestSetQueueRetention(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		clock := newFakeClock()
		c := kyu.NewClient(s, kyu.ClientConfig{Clock: clock})
		r := kyu.QueueRetention{Completed: kyu.RetainFor(time.Hour), Failed: kyu.RetainForever}
		settings, err := c.SetQueueRetention(t.Context(), "short", r)
		if err != nil {
			t.Fatal(err)
		}
		if settings.Retention != r {
			t.Fatalf("retention = %+v, want %+v", settings.Retention, r)
		}
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(context.Context, *kyu.Job) error { return nil }),
			Queues:  map[string]int{"short": 1},
			Clock:   clock,
		})
		id := enqueue(t, c, "x", nil, kyu.EnqueueOptions{Queue: "short"})
		job := waitState(t, s, c, id, kyu.StateCompleted)
		if want := job.FinishedAt.Add(time.Hour); !job.ExpiresAt.Equal(want) {
			t.Errorf("expires at %s, want finish + 1h = %s", job.ExpiresAt, want)
		}
		if _, err := c.SetQueueRetention(t.Context(), "short", kyu.QueueRetention{Completed: -5}); err == nil {
			t.Error("SetQueueRetention accepted an undefined retention")
		}
	})
}

func TestListAndStats(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := kyu.NewClient(s, kyu.ClientConfig{})
	var ids []string
	for i := range 7 {
		tag := "odd"
		if i%2 == 0 {
			tag = "even"
		}
		ids = append(ids, enqueue(t, c, "listed", nil, kyu.EnqueueOptions{Queue: "l", Title: "job", Tags: []string{tag}}))
	}
	enqueue(t, c, "other", nil, kyu.EnqueueOptions{Queue: "m"})

	var got []string
	opts := kyu.ListOptions{Queue: "l", Limit: 3, Order: kyu.NewestFirst}
	for {
		page, err := c.List(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Jobs {
			got = append(got, j.ID)
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	if len(got) != 7 || got[0] != ids[6] || got[6] != ids[0] {
		t.Fatalf("listed %v, want the 7 jobs of queue l newest first", got)
	}
	page, err := c.List(t.Context(), kyu.ListOptions{Search: "even"})
	if err != nil || len(page.Jobs) != 4 {
		t.Fatalf("search by tag: %d jobs, %v; want 4", len(page.Jobs), err)
	}
	var verr *kyu.ValidationError
	if _, err := c.List(t.Context(), kyu.ListOptions{Queue: "l", Cursor: "tampered"}); !errors.As(err, &verr) || verr.Field != "cursor" {
		t.Errorf("a tampered cursor = %v, want a ValidationError on the cursor", err)
	}

	st, err := c.Stats(t.Context(), 5)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	for _, q := range st.Queues {
		counts[q.Name] = q.Counts[kyu.StatePending]
	}
	if counts["l"] != 7 || counts["m"] != 1 || len(st.Minutes) != 5 {
		t.Errorf("pending counts %v with %d minutes, want l:7 m:1 and 5 minutes", counts, len(st.Minutes))
	}
}
