package kyu_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
)

func TestWorkerRegistry(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		started := make(chan struct{}, 1)
		release := make(chan struct{})
		w := startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				if job.Type == "hold" {
					started <- struct{}{}
					<-release
				}
				if job.Type == "fail" {
					return kyu.Permanent(errors.New("refused"))
				}
				return nil
			}),
			Queues:           map[string]int{"a": 2, "b": 3},
			RegistryInterval: 10 * time.Millisecond,
			Version:          "v9.9.9-test",
		})
		held := enqueue(t, c, "hold", nil, kyu.EnqueueOptions{Queue: "a"})
		recv(t, started, "handler start")

		// findSelf returns the worker's own entry, nil if not listed.
		findSelf := func() *kyu.WorkerInfo {
			ws, err := c.Workers(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for i := range ws {
				if ws[i].ID == w.ID() {
					return &ws[i]
				}
			}
			return nil
		}
		s.waitFor(t, "the registry to list the running job", func() bool {
			e := findSelf()
			return e != nil && slices.Equal(e.Running, []string{held})
		})
		e := findSelf()
		host, _ := os.Hostname()
		if e.PID != os.Getpid() || e.Host != host || e.Concurrency != 5 || !slices.Equal(e.Queues, []string{"a", "b"}) ||
			e.Version != "v9.9.9-test" || e.StartedAt.IsZero() || e.Dead {
			t.Errorf("entry = %+v", e)
		}

		close(release)
		enqueue(t, c, "ok", nil, kyu.EnqueueOptions{Queue: "b"})
		enqueue(t, c, "fail", nil, kyu.EnqueueOptions{Queue: "b"})
		s.waitFor(t, "the registry to count three attempts, one failed", func() bool {
			e := findSelf()
			return e != nil && e.Processed == 3 && e.Failed == 1 && len(e.Running) == 0
		})

		if err := w.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		if e := findSelf(); e != nil {
			t.Fatalf("the worker is still listed after a clean shutdown: %+v", e)
		}
	})
}

// Every worker has its own id, also when built in the same process.
func TestWorkerIDsDiffer(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	h := kyu.HandlerFunc(func(context.Context, *kyu.Job) error { return nil })
	a, err := kyu.NewWorker(s, kyu.WorkerConfig{Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	b, err := kyu.NewWorker(s, kyu.WorkerConfig{Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	if a.ID() == "" || a.ID() == b.ID() {
		t.Fatalf("ids %q and %q, want two distinct ones", a.ID(), b.ID())
	}
}
