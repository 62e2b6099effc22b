package kyu

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// The worker's timeouts end each context at its deadline, not before, and
// never one that left before its deadline, whatever the order of adds and
// removes.
func TestTimeouts(t *testing.T) {
	t.Parallel()
	var ts timeouts
	start := time.Now()
	const n = 60
	var mu sync.Mutex
	firedAt := make(map[int]time.Time)
	ctxs := make([]*runContext, n)
	for _, i := range rand.Perm(n) {
		c := &runContext{deadline: start.Add(time.Duration(10+rand.IntN(150)) * time.Millisecond), index: -1}
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := len(firedAt)
		mu.Unlock()
		if got == n-n/3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d timeouts fired", got, n-n/3)
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, c := range ctxs {
		at, fired := firedAt[i]
		switch {
		case i%3 == 0 && fired:
			t.Errorf("context %d fired after it was removed", i)
		case i%3 != 0 && at.Before(c.deadline):
			t.Errorf("context %d fired %s before its deadline", i, c.deadline.Sub(at))
		case i%3 != 0 && (!c.timedOut.Load() || c.index != -1):
			t.Errorf("context %d: timedOut %v, index %d after firing", i, c.timedOut.Load(), c.index)
		}
	}
	if len(ts.heap) != 0 || !ts.armed.IsZero() {
		t.Errorf("heap holds %d, armed %v after every deadline", len(ts.heap), ts.armed)
	}
}
