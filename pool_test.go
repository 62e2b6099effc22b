package kyu_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kyuhq/kyu"
)

// enqueueIn adds n jobs of type "work" to queue and returns their ids.
func enqueueIn(tb testing.TB, c *kyu.Client, queue string, n int) []string {
	tb.Helper()
	jobs := make([]kyu.JobSpec, n)
	for i := range jobs {
		jobs[i] = kyu.JobSpec{Type: "work", EnqueueOptions: kyu.EnqueueOptions{Queue: queue}}
	}
	return enqueueSpecs(tb, c, jobs)
}

// waitSucceeded waits until every job of ids has ended, then until the
// worker has counted them, and checks that it counted n successes.
func waitSucceeded(t *testing.T, s *store, w *kyu.Worker, ids []string, n int64) {
	t.Helper()
	waitAllFinal(t, s, ids)
	synctest.Wait()
	if st := w.Stats(); st.Succeeded != n {
		t.Fatalf("stats = %+v; want %d succeeded", st, n)
	}
}

// queueLog records the queue of each job as its handler starts.
type queueLog struct {
	mu     sync.Mutex
	queues []string
}

func (l *queueLog) add(q string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queues = append(l.queues, q)
	return len(l.queues)
}

func (l *queueLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.queues)
}

// In strict order a later queue is served only while every earlier one is
// empty: with one handler, the jobs run queue by queue in the listed order
// (not the names' order), and the last queue is served once the others
// are drained.
func TestWorkerPoolStrictOrder(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		order := []string{"critical", "default", "bulk"}
		const perQueue = 15
		var ids []string
		for _, q := range order {
			ids = append(ids, enqueueIn(t, c, q, perQueue)...)
		}
		var log queueLog
		w := startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(_ context.Context, job *kyu.Job) error {
				log.add(job.Queue)
				return nil
			}),
			Pool: &kyu.PoolConfig{Concurrency: 1, Queues: []kyu.PoolQueue{
				{Name: order[0]}, {Name: order[1]}, {Name: order[2]},
			}},
		})
		waitSucceeded(t, s, w, ids, 3*perQueue)
		var want []string
		for _, q := range order {
			for range perQueue {
				want = append(want, q)
			}
		}
		if got := log.snapshot(); !slices.Equal(got, want) {
			t.Fatalf("jobs ran in queue order %v; want %d of each queue in the order %v", got, perQueue, order)
		}
	})
}

// In weighted order each claim draws the queue order by weight: with both
// queues full and one handler, about three in four jobs come from the
// queue of weight 3.
func TestWorkerPoolWeightedOrder(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		const perQueue, counted = 200, 200
		ids := append(enqueueIn(t, c, "heavy", perQueue), enqueueIn(t, c, "light", perQueue)...)
		var log queueLog
		w := startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(_ context.Context, job *kyu.Job) error {
				log.add(job.Queue)
				return nil
			}),
			Pool: &kyu.PoolConfig{Concurrency: 1, Queues: []kyu.PoolQueue{
				{Name: "light", Weight: 1}, {Name: "heavy", Weight: 3},
			}},
			ClaimBatch: 1,
		})
		waitSucceeded(t, s, w, ids, 2*perQueue)
		heavy := 0
		for _, q := range log.snapshot()[:counted] {
			if q == "heavy" {
				heavy++
			}
		}
		// Expected 150 of 200; the bounds are about five standard deviations.
		if heavy < 120 || heavy > 180 {
			t.Fatalf("of the first %d jobs, %d came from the queue of weight 3; want 120-180", counted, heavy)
		}
	})
}

// peak tracks the most handlers of one queue running at once.
type peak struct{ live, max atomic.Int32 }

func (p *peak) enter() {
	n := p.live.Add(1)
	for {
		m := p.max.Load()
		if n <= m || p.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (p *peak) leave() { p.live.Add(-1) }

// A capped queue never runs more handlers than its cap, even first in
// strict order with many jobs waiting, and the rest of the pool serves
// the other queues meanwhile.
func TestWorkerPoolQueueCap(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		const slowJobs, fastJobs, slowMax = 12, 40, 2
		slowIDs := enqueueIn(t, c, "slow", slowJobs)
		fastIDs := enqueueIn(t, c, "fast", fastJobs)
		var slow, all peak
		var fastDone atomic.Int32
		gate := make(chan struct{})
		w := startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				all.enter()
				defer all.leave()
				if job.Queue == "fast" {
					fastDone.Add(1)
					return nil
				}
				slow.enter()
				defer slow.leave()
				select {
				case <-gate:
				case <-ctx.Done():
				}
				return nil
			}),
			Pool: &kyu.PoolConfig{Concurrency: 5, Queues: []kyu.PoolQueue{
				{Name: "slow", Max: slowMax}, {Name: "fast"},
			}},
		})
		// The slow jobs hold their handlers until the gate opens: the fast
		// queue drains beside them on the slots the cap leaves.
		waitAllFinal(t, s, fastIDs)
		synctest.Wait()
		if done, live := fastDone.Load(), slow.live.Load(); done != fastJobs || live != slowMax {
			t.Fatalf("the fast queue ran %d of its %d jobs and the slow one runs %d at once; want all and its cap, %d",
				done, fastJobs, live, slowMax)
		}
		close(gate)
		waitSucceeded(t, s, w, append(slowIDs, fastIDs...), slowJobs+fastJobs)
		if n := slow.max.Load(); n > slowMax {
			t.Fatalf("the slow queue ran %d handlers at once; its cap is %d", n, slowMax)
		}
		if n := all.max.Load(); n > 5 {
			t.Fatalf("the pool ran %d handlers at once; its concurrency is 5", n)
		}
	})
}

// A paused queue of the pool is skipped, in both orders; the others are
// served, and the paused one is once it is resumed.
func TestWorkerPoolSkipsPausedQueue(t *testing.T) {
	t.Parallel()
	for _, weight := range []int{0, 5} {
		t.Run(map[int]string{0: "strict", 5: "weighted"}[weight], func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				s := newStore(t)
				c := kyu.NewClient(s, kyu.ClientConfig{})
				ctx := context.Background()
				if _, err := c.PauseQueue(ctx, "paused"); err != nil {
					t.Fatal(err)
				}
				pausedIDs := enqueueIn(t, c, "paused", 5)
				openIDs := enqueueIn(t, c, "open", 5)
				var ran sync.Map
				w := startWorker(t, s, kyu.WorkerConfig{
					Handler: kyu.HandlerFunc(func(_ context.Context, job *kyu.Job) error {
						ran.Store(job.ID, job.Queue)
						return nil
					}),
					Pool: &kyu.PoolConfig{Concurrency: 3, Queues: []kyu.PoolQueue{
						{Name: "paused", Weight: weight}, {Name: "open", Weight: weight},
					}},
				})
				waitSucceeded(t, s, w, openIDs, 5)
				ran.Range(func(_, q any) bool {
					if q != "open" {
						t.Errorf("a job of queue %v ran while it was paused", q)
					}
					return true
				})
				if _, err := c.ResumeQueue(ctx, "paused"); err != nil {
					t.Fatal(err)
				}
				waitSucceeded(t, s, w, pausedIDs, 10)
			})
		})
	}
}

// A pool and queues of their own serve side by side; at shutdown with no
// grace, the pool's running jobs go back to pending at once.
func TestWorkerPoolBesideOwnQueues(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		own := enqueueIn(t, c, "own", 3)
		enqueueIn(t, c, "a", 2)
		enqueueIn(t, c, "b", 2)
		started := make(chan struct{}, 4)
		w, err := kyu.NewWorker(s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				if job.Queue == "own" {
					return nil
				}
				started <- struct{}{}
				<-ctx.Done()
				return ctx.Err()
			}),
			Queues:        map[string]int{"own": 1},
			Pool:          &kyu.PoolConfig{Concurrency: 4, Queues: []kyu.PoolQueue{{Name: "a"}, {Name: "b"}}},
			ShutdownGrace: kyu.NoShutdownGrace,
			Logger:        new(logBuffer).logger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		waitSucceeded(t, s, w, own, 3)
		for range 4 {
			recv(t, started, "four pool jobs to run")
		}
		if err := w.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		st, err := c.Stats(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		pooled := 0
		for _, q := range st.Queues {
			if q.Name == "own" {
				continue
			}
			pooled++
			if q.Counts[kyu.StatePending] != 2 || q.Counts[kyu.StateActive] != 0 {
				t.Errorf("queue %s after shutdown: %v; want its 2 jobs pending", q.Name, q.Counts)
			}
		}
		if pooled != 2 {
			t.Errorf("stats list %d pool queues; want 2", pooled)
		}
	})
}

// NewWorker refuses a pool that makes no sense, naming the problem, and
// accepts the plain forms.
func TestNewWorkerValidatesPool(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	h := kyu.HandlerFunc(func(context.Context, *kyu.Job) error { return nil })
	q := func(name string, weight, most int) kyu.PoolQueue {
		return kyu.PoolQueue{Name: name, Weight: weight, Max: most}
	}
	for _, tc := range []struct {
		pool    kyu.PoolConfig
		own     map[string]int
		message string
	}{
		{kyu.PoolConfig{Queues: []kyu.PoolQueue{q("a", 0, 0)}}, nil, "Concurrency is 0"},
		{kyu.PoolConfig{Concurrency: 2}, nil, "Queues is empty"},
		{kyu.PoolConfig{Concurrency: 2, Queues: []kyu.PoolQueue{q("no spaces", 0, 0)}}, nil, "is not 1-128 characters"},
		{kyu.PoolConfig{Concurrency: 2, Queues: []kyu.PoolQueue{q("a", 0, 0), q("a", 0, 0)}}, nil, `"a" is listed twice`},
		{kyu.PoolConfig{Concurrency: 2, Queues: []kyu.PoolQueue{q("a", 0, 0)}}, map[string]int{"a": 1}, "also in WorkerConfig.Queues"},
		{kyu.PoolConfig{Concurrency: 2, Queues: []kyu.PoolQueue{q("a", -1, 0)}}, nil, "weight -1"},
		{kyu.PoolConfig{Concurrency: 2, Queues: []kyu.PoolQueue{q("a", 2, 0), q("b", 0, 0)}}, nil, "give every queue a weight"},
		{kyu.PoolConfig{Concurrency: 2, Queues: []kyu.PoolQueue{q("a", 0, 0), q("b", 1, 0)}}, nil, "give every queue a weight"},
		{kyu.PoolConfig{Concurrency: 2, Queues: []kyu.PoolQueue{q("a", 0, 3)}}, nil, "Max 3"},
		{kyu.PoolConfig{Concurrency: 2, Queues: []kyu.PoolQueue{q("a", 0, -1)}}, nil, "Max -1"},
	} {
		_, err := kyu.NewWorker(s, kyu.WorkerConfig{Handler: h, Queues: tc.own, Pool: &tc.pool})
		if err == nil || !strings.Contains(err.Error(), tc.message) {
			t.Errorf("pool %+v beside %v: NewWorker gave %v; want an error saying %q", tc.pool, tc.own, err, tc.message)
		}
	}
	for _, pool := range []kyu.PoolConfig{
		{Concurrency: 1, Queues: []kyu.PoolQueue{q("a", 0, 0)}},
		{Concurrency: 20, Queues: []kyu.PoolQueue{q("a", 6, 10), q("b", 3, 0), q("c", 1, 2)}},
	} {
		if _, err := kyu.NewWorker(s, kyu.WorkerConfig{Handler: h, Queues: map[string]int{"own": 2}, Pool: &pool}); err != nil {
			t.Errorf("pool %+v: %v", pool, err)
		}
	}
}

// A handler of a capped queue that ignores its context past its timeout
// is abandoned, and gives back its queue's slot under the cap as well as
// the pool's: the job's next attempt runs in the same queue, which the
// cap would otherwise keep out of every claim. Nothing is left active.
func TestWorkerPoolCapFreedByAbandonedHandler(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s := newStore(t)
		c := kyu.NewClient(s, kyu.ClientConfig{})
		hang := make(chan struct{})
		t.Cleanup(sync.OnceFunc(func() { close(hang) }))
		startWorker(t, s, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				if job.Attempt == 1 {
					<-hang // ignores its context
				}
				return nil
			}),
			Pool: &kyu.PoolConfig{Concurrency: 3, Queues: []kyu.PoolQueue{
				{Name: "stubborn", Max: 1}, {Name: "other"},
			}},
			Lease:   time.Second, // also the grace past the timeout
			Backoff: kyu.FixedBackoff(0),
			Logger:  new(logBuffer).logger(),
		})
		id := enqueue(t, c, "work", nil, kyu.EnqueueOptions{Queue: "stubborn", Timeout: 50 * time.Millisecond})
		job := waitState(t, s, c, id, kyu.StateCompleted)
		if job.Attempt != 2 {
			t.Fatalf("completed at attempt %d; want 2, after the abandoned first", job.Attempt)
		}
		st, err := c.Stats(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range st.Queues {
			if n := q.Counts[kyu.StateActive]; n != 0 {
				t.Errorf("queue %s has %d active jobs after the run", q.Name, n)
			}
		}
	})
}
