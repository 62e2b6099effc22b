package redis

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestCallgrindIdle is TestCallgrindPhases for idle jobs: a waiting
// claim of one queue (ClaimWait, as an idle worker's), then the enqueue
// of one job that fills it, 50 times to warm up, a callgrind dump, 1,000
// times more and a dump, then 1,000 looks at the empty queue (the claim
// each waiting claim makes before it waits) and a dump, then the
// completions of the 1,000 jobs, one per call, and a dump. The second
// dump's instructions less the third's, over 1,000, are an idle job's
// enqueue and claim. It logs each measured phase's length (Redis's
// timers cost it about a million instructions a second under callgrind)
// and INFO commandstats.
// Skipped unless KYU_CALLGRIND_ADDR and KYU_CALLGRIND_PID are set (see
// the Redis section of docs/benchmarks.md for the commands).
func TestCallgrindIdle(t *testing.T) {
	addr, pid := os.Getenv("KYU_CALLGRIND_ADDR"), os.Getenv("KYU_CALLGRIND_PID")
	if addr == "" || pid == "" {
		t.Skip("KYU_CALLGRIND_ADDR and KYU_CALLGRIND_PID are not set")
	}
	const n = 1000
	ctx := context.Background()
	s, err := Open(ctx, Options{Addrs: []string{addr}, Prefix: testPrefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	deafen(t, s)
	dump := func() {
		if out, err := exec.Command("callgrind_control", "-d", pid).CombinedOutput(); err != nil {
			t.Fatalf("callgrind_control: %v: %s", err, out)
		}
	}
	do := func(args ...string) string {
		out, err := s.client.Do(ctx, s.client.B().Arbitrary(args...).Build()).ToString()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out
	}
	var began time.Time
	stats := func(phase string) {
		var calls []string
		for line := range strings.Lines(do("INFO", "commandstats")) {
			if name, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
				c, _, _ := strings.Cut(v, ",")
				calls = append(calls, strings.TrimPrefix(name, "cmdstat_")+" "+strings.TrimPrefix(c, "calls="))
			}
		}
		t.Logf("%s (%v): %s", phase, time.Since(began).Round(time.Millisecond), strings.Join(calls, ", "))
	}
	var leases []backend.Lease
	idle := func(k int) {
		for range k {
			answer := claimAsync(ctx, s, waitClaimParams(1, "idle"))
			// Polled closely: Redis's own timers cost it about a million
			// instructions a second under callgrind, which a phase's
			// length adds to its count.
			for deadline := time.Now().Add(10 * time.Second); s.handoffs.n.Load() != 1; {
				if time.Now().After(deadline) {
					t.Fatal("the waiting claim was not registered")
				}
				time.Sleep(50 * time.Microsecond)
			}
			res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{{Type: "bench", Queue: "idle", Payload: benchPayload}}})
			if err != nil {
				t.Fatal(err)
			}
			id := res.Jobs[0].ID
			a := <-answer
			if a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != id {
				t.Fatalf("ClaimWait = %+v, %v; want job %s", a.res, a.err, id)
			}
			leases = append(leases, backend.Lease{JobID: id, Token: a.res.Jobs[0].LeaseToken})
		}
	}
	idle(50)
	dump()
	do("CONFIG", "RESETSTAT")
	began = time.Now()
	idle(n)
	stats("idle jobs")
	dump()
	do("CONFIG", "RESETSTAT")
	began = time.Now()
	for range n {
		if res, err := s.claim(ctx, s.client, waitClaimParams(1, "idle"), true); err != nil || len(res.Jobs) != 0 {
			t.Fatalf("Claim = %+v, %v; want nothing", res, err)
		}
	}
	stats("looks")
	dump()
	do("CONFIG", "RESETSTAT")
	began = time.Now()
	for _, l := range leases[50:] {
		if _, err := s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: l}}, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	stats("completions")
	dump()
}
