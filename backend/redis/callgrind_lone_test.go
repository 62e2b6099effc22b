package redis

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestCallgrindLone is TestCallgrindPhases for a lone producer only: 200
// single enqueues to warm up, a callgrind dump, then 2,000 more and a
// dump, whose instructions over 2,000 are a lone enqueue's cost to Redis.
// Skipped unless KYU_CALLGRIND_ADDR and KYU_CALLGRIND_PID are set (see
// the Redis section of docs/benchmarks.md for the commands).
func TestCallgrindLone(t *testing.T) {
	addr, pid := os.Getenv("KYU_CALLGRIND_ADDR"), os.Getenv("KYU_CALLGRIND_PID")
	if addr == "" || pid == "" {
		t.Skip("KYU_CALLGRIND_ADDR and KYU_CALLGRIND_PID are not set")
	}
	ctx := context.Background()
	s, err := Open(ctx, Options{Addrs: []string{addr}, Prefix: testPrefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	enqueue := func(n int) {
		one := []backend.NewJob{{Type: "bench", Queue: "bench", Payload: benchPayload}}
		for range n {
			if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: one}); err != nil {
				t.Fatal(err)
			}
		}
	}
	dump := func() {
		if out, err := exec.Command("callgrind_control", "-d", pid).CombinedOutput(); err != nil {
			t.Fatalf("callgrind_control: %v: %s", err, out)
		}
	}
	enqueue(200)
	dump()
	enqueue(2000)
	dump()
}
