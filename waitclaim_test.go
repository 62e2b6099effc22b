package kyu_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/pebble"
)

// countingWaiter is a pebble store that counts its waiting claims and
// the jobs they filled, and its plain claims.
type countingWaiter struct {
	*pebble.Store
	waits, filled, claims atomic.Int64
}

func (s *countingWaiter) Claim(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	s.claims.Add(1)
	return s.Store.Claim(ctx, p)
}

func (s *countingWaiter) ClaimWait(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	s.waits.Add(1)
	res, err := s.Store.ClaimWait(ctx, p)
	s.filled.Add(int64(len(res.Jobs)))
	return res, err
}

// An idle worker on a store that holds waiting claims gets its jobs
// through them, each job once, and shuts down while a claim waits
// without leaving a job behind; also when a short poll renews the waiting
// claim all the time (a claim filled as it is renewed is released and
// claimed again).
func TestWorkerWaitingClaim(t *testing.T) {
	t.Parallel()
	for _, poll := range []time.Duration{time.Hour, time.Millisecond} {
		t.Run(poll.String(), func(t *testing.T) {
			t.Parallel()
			workerWaitingClaim(t, poll)
		})
	}
}

func workerWaitingClaim(t *testing.T, poll time.Duration) {
	s := &countingWaiter{Store: newPebble(t)}
	c := kyu.NewClient(s, kyu.ClientConfig{WaitPollInterval: time.Hour})
	var mu sync.Mutex
	runs := make(map[string]int)
	ran := make(chan string, 100)
	w, err := kyu.NewWorker(s, kyu.WorkerConfig{
		Handler: kyu.HandlerFunc(func(_ context.Context, job *kyu.Job) error {
			mu.Lock()
			runs[job.ID]++
			mu.Unlock()
			ran <- job.ID
			return nil
		}),
		Queues:        map[string]int{"default": 4},
		PollInterval:  poll,
		ShutdownGrace: kyu.NoShutdownGrace,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// One job at a time, each enqueued while the worker is idle.
	for range 5 {
		id := enqueue(t, c, "t", nil, kyu.EnqueueOptions{})
		if got := recv(t, ran, "a job run"); got != id {
			t.Fatalf("ran %s; want %s", got, id)
		}
		waitFinal(t, c, id)
	}
	// A batch: more than the concurrency.
	specs := make([]kyu.JobSpec, 20)
	for i := range specs {
		specs[i] = kyu.JobSpec{Type: "t"}
	}
	ids := enqueueSpecs(t, c, specs)
	for range ids {
		recv(t, ran, "a job of the batch run")
	}
	waitAllFinal(t, s, ids)
	if s.filled.Load() == 0 {
		t.Fatalf("waiting claims filled no job (%d claims waited)", s.waits.Load())
	}
	mu.Lock()
	for id, n := range runs {
		if n != 1 {
			t.Errorf("job %s ran %d times", id, n)
		}
	}
	mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown while a claim waits: %v", err)
	}
	id := enqueue(t, c, "t", nil, kyu.EnqueueOptions{})
	if j, err := c.Get(context.Background(), id); err != nil || j.State != kyu.StatePending {
		t.Fatalf("job enqueued after shutdown: %+v, %v; want pending", j, err)
	}
}

// An idle worker whose waiting claim took the one job enqueued waits
// again with no claim in between: the next waiting claim claims before
// it waits. Failed before the fetcher left that look to it: one plain,
// empty claim per job.
func TestIdleWorkerClaimsOnlyWaiting(t *testing.T) {
	t.Parallel()
	s := &countingWaiter{Store: newPebble(t)}
	c := kyu.NewClient(s, kyu.ClientConfig{WaitPollInterval: time.Hour})
	ran := make(chan string, 1)
	startWorker(t, s, kyu.WorkerConfig{
		Handler:      kyu.HandlerFunc(func(_ context.Context, job *kyu.Job) error { ran <- job.ID; return nil }),
		Queues:       map[string]int{"default": 4},
		PollInterval: time.Hour,
	})
	awaitWaits := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(waitTimeout)
		for s.waits.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("waiting claims = %d; want %d", s.waits.Load(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	awaitWaits(1)
	start := s.claims.Load() // the worker's first claim, as it starts
	const jobs = 5
	for i := range jobs {
		id := enqueue(t, c, "t", nil, kyu.EnqueueOptions{})
		if got := recv(t, ran, "a job run"); got != id {
			t.Fatalf("ran %s; want %s", got, id)
		}
		waitFinal(t, c, id)
		awaitWaits(int64(i + 2))
	}
	if got := s.claims.Load() - start; got != 0 {
		t.Fatalf("plain claims of an idle worker over %d jobs its waiting claims took = %d; want 0", jobs, got)
	}
	if got := s.filled.Load(); got != jobs {
		t.Fatalf("jobs filled by waiting claims = %d; want %d", got, jobs)
	}
}
