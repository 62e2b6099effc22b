package kyu_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

// Cancelling an active job cancels its handler's context at the next
// heartbeat, with the cause ErrCancelled, and the job ends cancelled even
// though the handler then reports success.
func TestCancelActiveJob(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		started := make(chan struct{}, 1)
		causes := make(chan error, 1)
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				started <- struct{}{}
				<-ctx.Done()
				causes <- context.Cause(ctx)
				job.SetResult([]byte("partial"))
				return nil // success, too late
			}),
			Lease:             time.Minute,
			HeartbeatInterval: 10 * time.Millisecond,
		})
		id := enqueue(t, c, "long", nil, kyu.EnqueueOptions{MaxAttempts: 5})
		recv(t, started, "handler start")

		job, err := c.Cancel(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if job.State != kyu.StateActive || !job.CancelRequested {
			t.Fatalf("right after Cancel the job is %s, cancel requested %v; want active and requested", job.State, job.CancelRequested)
		}
		if cause := recv(t, causes, "the handler's context to end"); !errors.Is(cause, kyu.ErrCancelled) {
			t.Fatalf("cause = %v, want ErrCancelled", cause)
		}
		job = waitState(t, s, c, id, kyu.StateCancelled)
		if job.CancelReason != backend.CancelReasonRequested || job.Attempt != 1 {
			t.Errorf("reason %q at attempt %d, want %q at attempt 1", job.CancelReason, job.Attempt, backend.CancelReasonRequested)
		}
	})
}

// A handler that ignores the cancel and fails is not retried either.
func TestCancelActiveJobHandlerFails(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		started := make(chan struct{}, 1)
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				started <- struct{}{}
				<-ctx.Done()
				return context.Cause(ctx)
			}),
			Lease:             time.Minute,
			HeartbeatInterval: 10 * time.Millisecond,
			Backoff:           kyu.FixedBackoff(0),
		})
		id := enqueue(t, c, "long", nil, kyu.EnqueueOptions{MaxAttempts: 5})
		recv(t, started, "handler start")
		if _, err := c.Cancel(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		job := waitState(t, s, c, id, kyu.StateCancelled)
		if job.Attempt != 1 || job.CancelReason != backend.CancelReasonRequested {
			t.Fatalf("cancelled at attempt %d with reason %q", job.Attempt, job.CancelReason)
		}
	})
}

func TestCancelWaitingJob(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := kyu.NewClient(s, kyu.ClientConfig{})
	id := enqueue(t, c, "later", nil, kyu.EnqueueOptions{Delay: time.Hour})
	job, err := c.Cancel(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if job.State != kyu.StateCancelled || job.CancelReason != backend.CancelReasonRequested || job.FinishedAt.IsZero() {
		t.Fatalf("job is %s (%q) finished at %s; want cancelled, requested, with a finish time", job.State, job.CancelReason, job.FinishedAt)
	}
	// A finished job cannot be cancelled; nor can one that does not exist.
	_, err = c.Cancel(t.Context(), id)
	var serr *kyu.StateError
	if !errors.Is(err, kyu.ErrWrongState) || !errors.As(err, &serr) || serr.State != kyu.StateCancelled {
		t.Errorf("second Cancel = %v, want a StateError matching ErrWrongState", err)
	}
	if _, err := c.Cancel(t.Context(), "0190d9b2-0000-7000-8000-000000000000"); !errors.Is(err, kyu.ErrNotFound) {
		t.Errorf("Cancel of an unknown id = %v, want ErrNotFound", err)
	}
}

// A handler returning kyu.Cancel ends its job cancelled, not retried.
func TestHandlerCancels(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				return kyu.Cancel(errors.New("order was withdrawn"))
			}),
			Backoff: kyu.FixedBackoff(0),
		})
		id := enqueue(t, c, "ship", nil, kyu.EnqueueOptions{MaxAttempts: 5})
		job := waitState(t, s, c, id, kyu.StateCancelled)
		if job.CancelReason != backend.CancelReasonHandler || job.Attempt != 1 {
			t.Errorf("reason %q at attempt %d, want %q at attempt 1", job.CancelReason, job.Attempt, backend.CancelReasonHandler)
		}
		if len(job.Errors) != 1 || job.Errors[0].Kind != backend.AttemptCancelled || job.Errors[0].Message != "order was withdrawn" {
			t.Errorf("errors = %+v, want one cancelled attempt with the handler's message", job.Errors)
		}
	})
}

func TestCancelErrorUnwraps(t *testing.T) {
	t.Parallel()
	err := kyu.Cancel(io.EOF)
	if !errors.Is(err, io.EOF) || err.Error() != io.EOF.Error() {
		t.Errorf("Cancel(io.EOF) = %v, does not match io.EOF", err)
	}
	if kyu.IsPermanent(err) {
		t.Error("a Cancel error reports permanent")
	}
	if kyu.Cancel(nil) == nil {
		t.Error("Cancel(nil) = nil")
	}
}
