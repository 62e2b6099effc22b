package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

// execTracker counts a handler's executions per job and notices when one
// job runs twice at once (which two live leases would allow).
type execTracker struct {
	mu       sync.Mutex
	running  map[string]int
	ran      map[string]int
	overlaps []string
}

func newExecTracker() *execTracker {
	return &execTracker{running: map[string]int{}, ran: map[string]int{}}
}

// handler runs a job for about work, tracking it.
func (e *execTracker) handler(work time.Duration) kyu.Handler {
	return kyu.HandlerFunc(func(ctx context.Context, j *kyu.Job) error {
		e.mu.Lock()
		e.running[j.ID]++
		e.ran[j.ID]++
		if e.running[j.ID] > 1 {
			e.overlaps = append(e.overlaps, j.ID)
		}
		e.mu.Unlock()
		defer func() {
			e.mu.Lock()
			e.running[j.ID]--
			e.mu.Unlock()
		}()
		// The job's work: long enough that connections die mid-job.
		select {
		case <-time.After(work):
		case <-ctx.Done():
		}
		return nil
	})
}

// check fails the test for any job run twice at once or never.
func (e *execTracker) check(t *testing.T, ids []string) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.overlaps) > 0 {
		t.Errorf("%d jobs ran twice at once (held by two live leases), first %s", len(e.overlaps), e.overlaps[0])
	}
	again := 0
	for _, id := range ids {
		switch n := e.ran[id]; {
		case n == 0:
			t.Errorf("job %s never ran", id)
		case n > 1:
			again++
		}
	}
	t.Logf("%d jobs, %d ran more than once (at-least-once after a lost connection)", len(ids), again)
}

// enqueueFaultJobs enqueues n jobs into queue in batches and returns their ids.
func enqueueFaultJobs(t *testing.T, s *Store, queue string, n int) []string {
	t.Helper()
	var ids []string
	for len(ids) < n {
		jobs := make([]backend.NewJob, min(100, n-len(ids)))
		for i := range jobs {
			jobs[i] = backend.NewJob{Type: "fault", Queue: queue, Payload: benchPayload()}
		}
		res, err := s.Enqueue(t.Context(), backend.EnqueueParams{Now: time.Now(), Jobs: jobs})
		if err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		for _, r := range res.Jobs {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// waitCompleted waits until every job of queue in schema is completed,
// counting through conn, or fails the test at the deadline.
func waitCompleted(t *testing.T, count func(ctx context.Context) (int, error), want int, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		n, err := count(t.Context())
		if err == nil && n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs completed after %s (last error %v)", n, want, bound, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFaultTerminateConnections kills every connection of the store (its
// pool and its LISTEN connection, found by their application_name) again
// and again while a worker processes jobs. No job may be lost, and none
// may run twice at once.
func TestFaultTerminateConnections(t *testing.T) {
	t.Parallel()
	app := "kyu_fault_" + testSchemaName(t)[len("kyu_test_"):]
	s := openTestStore(t, Options{MaxConns: 6, ApplicationName: app})
	const queue, jobs = "fault", 1500
	ids := enqueueFaultJobs(t, s, queue, jobs)

	tracker := newExecTracker()
	w, err := kyu.NewWorker(s, kyu.WorkerConfig{
		Queues:              map[string]int{queue: 20},
		Handler:             tracker.handler(2 * time.Millisecond),
		Lease:               3 * time.Second,
		PollInterval:        100 * time.Millisecond,
		MaintenanceInterval: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Shutdown(context.Background()) })

	admin, err := pgx.Connect(t.Context(), testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	count := func(ctx context.Context) (int, error) {
		var n int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM `+s.schema+`.jobs WHERE state = 'completed'`).Scan(&n)
		return n, err
	}

	// Kill the store's connections ten times, whenever more jobs are done.
	var killed atomic.Int64
	for round := range 10 {
		target := jobs * (round + 1) / 12
		waitCompleted(t, func(ctx context.Context) (int, error) {
			n, err := count(ctx)
			if n >= target {
				return target, err
			}
			return n, err
		}, target, 60*time.Second)
		var n int64
		err := admin.QueryRow(t.Context(),
			`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n)
		if err != nil {
			t.Fatalf("terminate: %v", err)
		}
		killed.Add(n)
	}
	if killed.Load() == 0 {
		t.Fatal("no connection of the store was terminated; the test proved nothing")
	}
	waitCompleted(t, count, jobs, 60*time.Second)
	tracker.check(t, ids)
	t.Logf("terminated %d connections in 10 rounds", killed.Load())
	var other int
	if err := admin.QueryRow(t.Context(), `SELECT count(*) FROM `+s.schema+`.jobs WHERE state <> 'completed'`).Scan(&other); err != nil || other != 0 {
		t.Fatalf("%d jobs not completed (%v)", other, err)
	}
}
