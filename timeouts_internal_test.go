package kyu

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The worker's timeouts end each context at its deadline, not before, and
// never one that left before its deadline, whatever the order of adds and
// removes.
func TestTimeouts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		ts := timeouts{epoch: start}
		const n = 60
		var mu sync.Mutex
		firedAt := make(map[int]time.Time)
		ctxs := make([]*runContext, n)
		for _, i := range rand.Perm(n) {
			c := &runContext{index: -1}
			c.deadline.Store(int64(time.Duration(10+rand.IntN(150)) * time.Millisecond))
			c.onTimeout = func() {
				mu.Lock()
				firedAt[i] = time.Now()
				mu.Unlock()
			}
			ctxs[i] = c
			ts.add(c)
		}
		for i := 0; i < n; i += 3 {
			ts.remove(ctxs[i])
			ts.remove(ctxs[i]) // a second remove does nothing
		}
		// In the bubble the timers fire on their times: once the clock is
		// past the last deadline and every callback has run, each context
		// left has fired.
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		mu.Lock()
		if got := len(firedAt); got != n-n/3 {
			t.Fatalf("%d of %d timeouts fired", got, n-n/3)
		}
		defer mu.Unlock()
		for i, c := range ctxs {
			at, fired := firedAt[i]
			switch {
			case i%3 == 0 && fired:
				t.Errorf("context %d fired after it was removed", i)
			case i%3 != 0 && at.Before(ts.time(c.deadline.Load())):
				t.Errorf("context %d fired %s before its deadline", i, ts.time(c.deadline.Load()).Sub(at))
			case i%3 != 0 && (c.Err() != context.DeadlineExceeded || c.index != -1):
				t.Errorf("context %d: Err %v, index %d after firing", i, c.Err(), c.index)
			}
		}
		if len(ts.heap) != 0 || ts.armed != 0 {
			t.Errorf("heap holds %d, armed %v after every deadline", len(ts.heap), ts.armed)
		}
	})
}

// A timeout too long to represent gives the last deadline there is, not
// one in the past.
func TestDeadlineAfterSaturates(t *testing.T) {
	t.Parallel()
	now := int64(time.Hour)
	if got := deadlineAfter(now, time.Minute); got != now+int64(time.Minute) {
		t.Errorf("deadlineAfter(1h, 1m) = %v", time.Duration(got))
	}
	if got := deadlineAfter(now, math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("deadlineAfter(1h, max) = %d, want %d", got, int64(math.MaxInt64))
	}
}

// The deadlines heap keeps its order and every context's index through
// random pushes and removals, and gives its contexts back earliest first.
func TestDeadlinesHeap(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	var h deadlines
	check := func() {
		t.Helper()
		for i, c := range h {
			if c.index != int32(i) {
				t.Fatalf("context at %d has index %d", i, c.index)
			}
			if i > 0 && h[(i-1)/2].deadline.Load() > c.deadline.Load() {
				t.Fatalf("context at %d is earlier than its parent", i)
			}
		}
	}
	for range 2000 {
		if len(h) > 0 && rng.IntN(3) == 0 {
			c := h.remove(rng.IntN(len(h)))
			if c.index != -1 {
				t.Fatalf("removed context has index %d", c.index)
			}
		} else {
			c := &runContext{}
			c.deadline.Store(rng.Int64N(50))
			h.push(c)
		}
		check()
	}
	last := int64(-1)
	for len(h) > 0 {
		c := h.remove(0)
		if c.deadline.Load() < last {
			t.Fatalf("deadline %d after %d", c.deadline.Load(), last)
		}
		last = c.deadline.Load()
		check()
	}
}
