package pebble

import (
	"context"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// t0 is the start of the tests' timeline; the store never reads a clock.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func openStore(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func enqueue(t testing.TB, s *Store, now time.Time, jobs ...backend.NewJob) []backend.EnqueuedJob {
	t.Helper()
	for i := range jobs {
		if jobs[i].Type == "" {
			jobs[i].Type = "test"
		}
	}
	res, err := s.Enqueue(context.Background(), backend.EnqueueParams{Jobs: jobs, Now: now})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	return res.Jobs
}

func claim(t testing.TB, s *Store, now time.Time, max int, queues ...string) []*backend.Job {
	t.Helper()
	if len(queues) == 0 {
		queues = []string{backend.DefaultQueue}
	}
	res, err := s.Claim(context.Background(), backend.ClaimParams{Queues: queues, Max: max, Lease: time.Minute, WorkerID: "w", Now: now})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return res.Jobs
}

func get(t testing.TB, s *Store, id string) *backend.Job {
	t.Helper()
	j, err := s.Get(context.Background(), backend.GetParams{ID: id})
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return j
}

func leaseOf(j *backend.Job) backend.Lease { return backend.Lease{JobID: j.ID, Token: j.LeaseToken} }
