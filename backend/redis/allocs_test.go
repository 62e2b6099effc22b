//go:build !race

package redis

import (
	"context"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestLoneEnqueueAllocs: a lone producer's Enqueue of a plain job
// allocates at most 8 times (8 on 2026-11-27, 12 before a group of one
// job kept its positions, ARGV and lean ARGV in its own allocation and
// the list of groups went on the stack; 23 before its reply stayed on
// the stack, its lean call stopped building the clock and wake channel
// it does not send, a lone caller stopped making a batch, a call of one
// group kept its call and reply on the stack, and a job's values became
// one string).
// Not under the race detector, which allocates for itself.
func TestLoneEnqueueAllocs(t *testing.T) {
	s := openTest(t, "")
	ctx := context.Background()
	enqueue := func() {
		_, err := s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{{Type: "bench", Queue: "bench", Payload: benchPayload}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	enqueue() // registers the queue, loads the library
	if n := testing.AllocsPerRun(200, enqueue); n > 8 {
		t.Errorf("a lone enqueue allocates %.1f times, want at most 8", n)
	}
}
