package redis

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestCallgrindPhases drives a redis-server that runs under valgrind's
// callgrind, for instruction counts per job that other processes on the
// machine do not move (Redis CPU time does). It is skipped unless
// KYU_CALLGRIND_ADDR (the server) and KYU_CALLGRIND_PID (valgrind's pid)
// are set. Around each phase it asks callgrind for a dump, so dumps 2, 3,
// 5, 6 and 7 hold the instructions of the phases: claim 3,000 jobs (50
// per call), complete them (50 per call), claim 50 and complete the 50
// claimed before, as a worker drains, for 3,000 more, enqueue 3,000 jobs
// one per call, and 3,000 more gatherCap per call, as single enqueues
// gathered into one run go (see the Redis section of docs/benchmarks.md
// for the commands).
func TestCallgrindPhases(t *testing.T) {
	addr, pid := os.Getenv("KYU_CALLGRIND_ADDR"), os.Getenv("KYU_CALLGRIND_PID")
	if addr == "" || pid == "" {
		t.Skip("KYU_CALLGRIND_ADDR and KYU_CALLGRIND_PID are not set")
	}
	const n = 3000
	ctx := context.Background()
	s, err := Open(ctx, Options{Addrs: []string{addr}, Prefix: testPrefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dump := func() {
		if out, err := exec.Command("callgrind_control", "-d", pid).CombinedOutput(); err != nil {
			t.Fatalf("callgrind_control: %v: %s", err, out)
		}
	}
	enqueue := func() {
		jobs := make([]backend.NewJob, 1000)
		for i := range jobs {
			jobs[i] = backend.NewJob{Type: "bench", Queue: "bench", Payload: benchPayload}
		}
		for left := n; left > 0; left -= len(jobs) {
			if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: jobs}); err != nil {
				t.Fatal(err)
			}
		}
	}
	claim := func() []backend.CompleteItem {
		res, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"bench"}, Max: 50, Lease: time.Hour, WorkerID: "bench", Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		items := completeItems(res.Jobs)
		return items
	}
	complete := func(items []backend.CompleteItem) {
		if _, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}

	enqueue()
	dump()
	var batches [][]backend.CompleteItem
	for items := claim(); len(items) > 0; items = claim() {
		batches = append(batches, items)
	}
	dump()
	for _, items := range batches {
		complete(items)
	}
	dump()
	enqueue()
	dump()
	var prev []backend.CompleteItem
	for {
		items := claim()
		if len(prev) > 0 {
			complete(prev)
		}
		if len(items) == 0 {
			break
		}
		prev = items
	}
	dump()
	one := []backend.NewJob{{Type: "bench", Queue: "bench", Payload: benchPayload}}
	for range n {
		if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: one}); err != nil {
			t.Fatal(err)
		}
	}
	dump()
	five := slices.Repeat(one, gatherCap)
	for range n / len(five) {
		if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: five}); err != nil {
			t.Fatal(err)
		}
	}
	dump()
}
