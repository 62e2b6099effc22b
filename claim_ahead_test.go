package kyu_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kyuhq/kyu"
)

// blockingHandler runs jobs that wait for release, counting those that
// run at once (running, and the most seen in most).
type blockingHandler struct {
	release       chan struct{}
	started       chan string
	running, most atomic.Int32
}

func newBlockingHandler() *blockingHandler {
	return &blockingHandler{release: make(chan struct{}), started: make(chan string, 100)}
}

func (h *blockingHandler) ProcessJob(ctx context.Context, job *kyu.Job) error {
	switch job.Type {
	case "quick":
		return nil
	case "long":
		time.Sleep(50 * time.Millisecond)
		return nil
	}
	n := h.running.Add(1)
	for m := h.most.Load(); n > m && !h.most.CompareAndSwap(m, n); m = h.most.Load() {
	}
	h.started <- job.ID
	<-h.release
	h.running.Add(-1)
	return nil
}

// warmUp runs a quick job in queue: a pool claims ahead only once its
// handlers have been seen to run short.
func warmUp(t *testing.T, s *store, c *kyu.Client, queue string) {
	t.Helper()
	waitAllFinal(t, s, enqueueSpecs(t, c, []kyu.JobSpec{{Type: "quick", EnqueueOptions: kyu.EnqueueOptions{Queue: queue}}}))
}

// countActive counts the jobs of ids that are active (claimed).
func countActive(t *testing.T, c *kyu.Client, ids []string) int {
	t.Helper()
	n := 0
	for _, id := range ids {
		j, err := c.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		if j.State == kyu.StateActive {
			n++
		}
	}
	return n
}

// A queue claims ClaimAhead jobs beyond its concurrency while its handlers
// are busy, and still runs no more than its concurrency at once.
func TestClaimAheadRunsAtMostConcurrency(t *testing.T) {
	bubble(t, func(t *testing.T) {
		const concurrency, ahead, jobs = 2, 3, 10
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		h := newBlockingHandler()
		startWorker(t, s, kyu.WorkerConfig{
			Handler:    h,
			Queues:     map[string]int{"q": concurrency},
			ClaimBatch: 1,
			ClaimAhead: ahead,
		})
		warmUp(t, s, c, "q")
		ids := enqueueIn(t, c, "q", jobs)
		synctest.Wait()
		if n := countActive(t, c, ids); n != concurrency+ahead {
			t.Errorf("%d jobs claimed while every handler is busy, want %d (concurrency %d + ClaimAhead %d)", n, concurrency+ahead, concurrency, ahead)
		}
		close(h.release)
		waitAllFinal(t, s, ids)
		if m := h.most.Load(); m != concurrency {
			t.Errorf("%d handlers ran at once, want %d", m, concurrency)
		}
	})
}

// A job claimed ahead starts its timeout when its handler starts, not
// when it was claimed: it may wait in the worker longer than its timeout.
func TestClaimAheadTimeoutStartsWithHandler(t *testing.T) {
	bubble(t, func(t *testing.T) {
		const timeout = 50 * time.Millisecond
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		release := make(chan struct{})
		type seen struct {
			start    time.Time
			deadline time.Time
			err      error
		}
		got := make(chan seen, 1)
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				switch job.Type {
				case "quick":
					return nil
				case "first":
					<-release
					return nil
				}
				d, _ := ctx.Deadline()
				got <- seen{start: time.Now(), deadline: d, err: ctx.Err()}
				return nil
			}),
			Queues:     map[string]int{"q": 1},
			ClaimAhead: 1,
		})
		warmUp(t, s, c, "q")
		ids := enqueueSpecs(t, c, []kyu.JobSpec{
			{Type: "first", EnqueueOptions: kyu.EnqueueOptions{Queue: "q"}},
			{Type: "second", EnqueueOptions: kyu.EnqueueOptions{Queue: "q", Timeout: timeout}},
		})
		synctest.Wait()
		if n := countActive(t, c, ids); n != 2 {
			t.Fatalf("%d jobs active, want the first running and the second claimed ahead", n)
		}
		time.Sleep(4 * timeout) // the second waits for the handler
		close(release)
		v := recv(t, got, "the second job's handler")
		if v.err != nil || !v.deadline.Equal(v.start.Add(timeout)) {
			t.Errorf("second job's handler started with Err %v and deadline %v after its start, want nil and %v",
				v.err, v.deadline.Sub(v.start), timeout)
		}
		waitAllFinal(t, s, ids)
	})
}

// Jobs claimed ahead count against their queue's cap in a pool: a capped
// queue never has more claimed than its cap.
func TestClaimAheadCountsAgainstQueueCap(t *testing.T) {
	bubble(t, func(t *testing.T) {
		const max = 2
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		h := newBlockingHandler()
		startWorker(t, s, kyu.WorkerConfig{
			Handler: h,
			Pool: &kyu.PoolConfig{Concurrency: 4, Queues: []kyu.PoolQueue{
				{Name: "capped", Max: max},
				{Name: "other"},
			}},
			ClaimAhead: 4,
		})
		warmUp(t, s, c, "other")
		// In one call, so that the first claim finds both queues' jobs:
		// enqueued apart, the pool may claim the 2 capped ones alone, then
		// 4 of the other, and wait for a full batch of room.
		var specs []kyu.JobSpec
		for i := range 16 {
			q := "other"
			if i < 6 {
				q = "capped"
			}
			specs = append(specs, kyu.JobSpec{Type: "work", EnqueueOptions: kyu.EnqueueOptions{Queue: q}})
		}
		ids := enqueueSpecs(t, c, specs)
		capped, other := ids[:6], ids[6:]
		synctest.Wait()
		if n := countActive(t, c, capped); n != max {
			t.Errorf("%d jobs of the capped queue claimed, want its cap %d", n, max)
		}
		if n := countActive(t, c, other); n != 2+4 {
			t.Errorf("%d jobs of the other queue claimed, want 6: 2 running, 4 ahead", n)
		}
		close(h.release)
		waitAllFinal(t, s, ids)
	})
}

// Shutdown hands the jobs claimed ahead back at once, their attempt not
// counted, while it still waits for the running handler.
func TestClaimAheadShutdownHandsBack(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		h := newBlockingHandler()
		w, err := kyu.NewWorker(s, kyu.WorkerConfig{
			Handler:    h,
			Queues:     map[string]int{"q": 1},
			ClaimAhead: 3,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		warmUp(t, s, c, "q")
		ids := enqueueIn(t, c, "q", 4)
		running := recv(t, h.started, "the first handler")
		synctest.Wait()
		if n := countActive(t, c, ids); n != 4 {
			t.Fatalf("%d jobs active, want 1 running and 3 claimed ahead", n)
		}
		stopped := make(chan error, 1)
		go func() { stopped <- w.Shutdown(context.Background()) }()
		synctest.Wait() // Shutdown waits for the running handler now
		for _, id := range ids {
			j, err := c.Get(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case id == running && j.State != kyu.StateActive:
				t.Errorf("running job is %s during Shutdown's grace, want active", j.State)
			case id != running && (j.State != kyu.StatePending || j.Attempt != 0):
				t.Errorf("job claimed ahead is %s at attempt %d during Shutdown, want pending at attempt 0", j.State, j.Attempt)
			}
		}
		close(h.release)
		if err := recv(t, stopped, "Shutdown"); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		waitState(t, s, c, running, kyu.StateCompleted)
	})
}

// A pool whose handlers run long claims nothing ahead: a job claimed
// ahead of them would wait about as long as they run, while another
// worker might have run it at once. It starts so, and goes back to it
// when its handlers turn long.
func TestClaimAheadNotForLongJobs(t *testing.T) {
	bubble(t, func(t *testing.T) {
		const concurrency = 2
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		h := newBlockingHandler()
		startWorker(t, s, kyu.WorkerConfig{
			Handler:    h,
			Queues:     map[string]int{"q": concurrency},
			ClaimBatch: 1,
			ClaimAhead: 3,
		})
		check := func(when string, want int) {
			t.Helper()
			ids := enqueueIn(t, c, "q", 10)
			synctest.Wait()
			if n := countActive(t, c, ids); n != want {
				t.Errorf("%s: %d jobs claimed while every handler is busy, want %d", when, n, want)
			}
			for range concurrency {
				h.release <- struct{}{}
			}
			// Let the handlers drain the rest, one release each.
			for range 10 - concurrency {
				recv(t, h.started, "a handler")
				h.release <- struct{}{}
			}
			waitAllFinal(t, s, ids)
			for len(h.started) > 0 {
				<-h.started
			}
		}
		check("at start", concurrency)
		warmUp(t, s, c, "q")
		check("after a quick job", concurrency+3)
		waitAllFinal(t, s, enqueueSpecs(t, c, []kyu.JobSpec{
			{Type: "long", EnqueueOptions: kyu.EnqueueOptions{Queue: "q"}},
			{Type: "long", EnqueueOptions: kyu.EnqueueOptions{Queue: "q"}},
		}))
		check("after long jobs", concurrency)
	})
}
