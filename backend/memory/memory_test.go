package memory_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/backendtest"
	"github.com/kyuhq/kyu/backend/memory"
)

// TestConformance runs the suite against the in-memory store, a plain
// reading of the settled semantics: if a real store fails where this one
// passes, compare the two against the contract's doc.
func TestConformance(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backend.Backend {
		s := memory.New()
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestConcurrentUse runs producers, claimers and subscribers at once (run
// it with -race): every job is completed exactly once.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	const producers, perProducer, claimers = 4, 50, 4
	s := memory.New()
	defer s.Close()
	ctx := t.Context()
	now := time.Now()

	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for range perProducer {
				_, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "t", Queue: "q"}}})
				if err != nil {
					t.Errorf("Enqueue: %v", err)
					return
				}
			}
		})
	}
	var mu sync.Mutex
	done := map[string]int{}
	all := make(chan struct{}) // closed when every job is done
	for i := range claimers {
		wg.Go(func() {
			sub, err := s.Subscribe(ctx, backend.SubscribeParams{Queues: []string{"q"}})
			if err != nil {
				t.Errorf("Subscribe: %v", err)
				return
			}
			defer sub.Close()
			deadline := time.After(10 * time.Second)
			for {
				res, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 3, Lease: time.Minute, WorkerID: fmt.Sprint("w", i), Now: now})
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				for _, j := range res.Jobs {
					r, err := s.Complete(ctx, backend.CompleteParams{Now: now, Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: j.ID, Token: j.LeaseToken}}}})
					if err != nil || r.Errors[0] != nil {
						t.Errorf("Complete(%s): %v %v", j.ID, err, r.Errors)
						return
					}
					mu.Lock()
					done[j.ID]++
					if len(done) == producers*perProducer && done[j.ID] == 1 {
						close(all)
					}
					mu.Unlock()
				}
				if len(res.Jobs) > 0 {
					continue
				}
				select {
				case <-sub.C:
				case <-all:
					return
				case <-deadline:
					t.Errorf("claimer %d: no wake-up within 10s", i)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(done) != producers*perProducer {
		t.Fatalf("%d jobs completed; want %d", len(done), producers*perProducer)
	}
	for id, n := range done {
		if n != 1 {
			t.Fatalf("job %s completed %d times", id, n)
		}
	}
}

// TestWorkerNeedsNoPolling runs a Worker and a waiting Client that would
// poll only once an hour: the store's signals alone must start each job
// and end each wait.
func TestWorkerNeedsNoPolling(t *testing.T) {
	t.Parallel()
	s := memory.New()
	defer s.Close()
	w, err := kyu.NewWorker(s, kyu.WorkerConfig{
		Handler: kyu.HandlerFunc(func(ctx context.Context, j *kyu.Job) error {
			j.SetResult(j.Payload)
			return nil
		}),
		PollInterval:       time.Hour,
		DisableMaintenance: true,
		Logger:             slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer w.Shutdown(context.Background())
	c := kyu.NewClient(s, kyu.ClientConfig{WaitPollInterval: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	const jobs = 20
	for i := range jobs {
		j, err := c.EnqueueAndWait(ctx, "echo", []byte(fmt.Sprint(i)), kyu.EnqueueOptions{})
		if err != nil {
			t.Fatalf("job %d: %v (after %s)", i, err, time.Since(start))
		}
		if j.State != kyu.StateCompleted || string(j.Result) != fmt.Sprint(i) {
			t.Fatalf("job %d: state %s, result %q", i, j.State, j.Result)
		}
	}
	t.Logf("%d jobs enqueued and waited for one by one in %s", jobs, time.Since(start))
}
