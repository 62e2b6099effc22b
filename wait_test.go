package kyu_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

// Wait is woken by the store's signal: with an hour between polls, nothing
// else could make it return.
func TestWaitWakesOnCompletion(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{WaitPollInterval: time.Hour})
		started := make(chan struct{}, 1)
		release := make(chan struct{})
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				started <- struct{}{}
				<-release
				job.SetResult([]byte("done"))
				return nil
			}),
		})
		id := enqueue(t, c, "slow", nil, kyu.EnqueueOptions{})
		recv(t, started, "handler start")
		type answer struct {
			job *kyu.Job
			err error
		}
		got := make(chan answer, 1)
		go func() {
			job, err := c.Wait(t.Context(), id)
			got <- answer{job, err}
		}()
		close(release)
		a := recv(t, got, "Wait to return")
		if a.err != nil {
			t.Fatal(a.err)
		}
		if a.job.State != kyu.StateCompleted || string(a.job.Result) != "done" {
			t.Fatalf("Wait returned a %s job with result %q, want completed with \"done\"", a.job.State, a.job.Result)
		}
	})
}

func TestWaitReturnsWhenContextEnds(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{WaitPollInterval: time.Hour})
		id := enqueue(t, c, "never-run", nil, kyu.EnqueueOptions{})
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		job, err := c.Wait(ctx, id)
		if !errors.Is(err, context.DeadlineExceeded) || job != nil {
			t.Fatalf("Wait = %v, %v; want nil and DeadlineExceeded", job, err)
		}
	})
}

func TestWaitUnknownJob(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := kyu.NewClient(s, kyu.ClientConfig{})
	_, err := c.Wait(t.Context(), "0190d9b2-0000-7000-8000-000000000000")
	if !errors.Is(err, kyu.ErrNotFound) {
		t.Fatalf("Wait on an unknown id = %v, want ErrNotFound", err)
	}
}

// signalGets is a store that reports each Get on a channel.
type signalGets struct {
	backend.Backend
	got chan struct{}
}

func (s signalGets) Get(ctx context.Context, p backend.GetParams) (*backend.Job, error) {
	j, err := s.Backend.Get(ctx, p)
	select {
	case s.got <- struct{}{}:
	default:
	}
	return j, err
}

// A job deleted while someone waits for it ends the wait with an error
// that matches ErrNotFound and says it was deleted.
func TestWaitJobDeleted(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		store := signalGets{Backend: s, got: make(chan struct{}, 1)}
		c := kyu.NewClient(store, kyu.ClientConfig{WaitPollInterval: time.Hour})
		id := enqueue(t, c, "doomed", nil, kyu.EnqueueOptions{})
		errc := make(chan error, 1)
		go func() {
			_, err := c.Wait(t.Context(), id)
			errc <- err
		}()
		recv(t, store.got, "Wait's first read")
		if err := c.Delete(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		err := recv(t, errc, "Wait to return")
		if !errors.Is(err, kyu.ErrNotFound) || !strings.Contains(err.Error(), "deleted") {
			t.Fatalf("Wait = %v, want ErrNotFound saying the job was deleted", err)
		}
	})
}

func TestEnqueueAndWait(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{WaitPollInterval: time.Hour})
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				if job.Type == "bad" {
					return kyu.Permanent(errors.New("bad request"))
				}
				job.SetResult(append([]byte("echo "), job.Payload...))
				return nil
			}),
		})
		job, err := c.EnqueueAndWait(t.Context(), "echo", []byte("hi"), kyu.EnqueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if job.State != kyu.StateCompleted || string(job.Result) != "echo hi" {
			t.Fatalf("got a %s job with result %q", job.State, job.Result)
		}
		job, err = c.EnqueueAndWait(t.Context(), "bad", nil, kyu.EnqueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if job.State != kyu.StateFailed || len(job.Errors) != 1 || job.Errors[0].Message != "bad request" {
			t.Fatalf("got a %s job with errors %+v, want failed with \"bad request\"", job.State, job.Errors)
		}
		// A held unique key: the second caller waits for the first job.
		opts := kyu.EnqueueOptions{UniqueKey: "k", UniqueFor: time.Hour}
		first, err := c.EnqueueAndWait(t.Context(), "echo", []byte("one"), opts)
		if err != nil {
			t.Fatal(err)
		}
		second, err := c.EnqueueAndWait(t.Context(), "echo", []byte("two"), opts)
		if err != nil {
			t.Fatal(err)
		}
		if second.ID != first.ID || string(second.Result) != "echo one" {
			t.Fatalf("duplicate waited for %s (%q), want %s (\"echo one\")", second.ID, second.Result, first.ID)
		}
	})
}

// With retention none, a completed job with a result is kept a while so
// that its waiter reads it.
func TestEnqueueAndWaitRetainNone(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{WaitPollInterval: time.Hour})
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				job.SetResult([]byte("kept for the waiter"))
				return nil
			}),
		})
		job, err := c.EnqueueAndWait(t.Context(), "answer", nil, kyu.EnqueueOptions{Retention: kyu.RetainNone})
		if err != nil {
			t.Fatal(err)
		}
		if string(job.Result) != "kept for the waiter" || job.ExpiresAt.IsZero() {
			t.Fatalf("result %q, expires at %s; want the result and an expiry", job.Result, job.ExpiresAt)
		}
	})
}
