package kyu

import (
	"container/heap"
	"math"
	"sync"
	"time"
)

// timeouts ends handlers' contexts at their jobs' timeouts with one timer
// for the whole worker instead of one per job: the running jobs' contexts
// wait in a heap ordered by deadline, and the timer is set for the
// earliest. A job that ends before its deadline leaves the heap; the timer
// is not moved for it, and when it fires for a deadline no longer waiting
// it is set for the next one.
//
// Deadlines are kept as nanoseconds of the monotonic clock since epoch
// (runContext.deadline), so that ordering them compares two integers.
type timeouts struct {
	// epoch is the origin of the deadlines, set by NewWorker.
	epoch time.Time

	mu    sync.Mutex
	heap  deadlines
	timer *time.Timer
	// armed is the deadline the timer is set for, zero when it is not set.
	armed int64
}

// now returns the present in the terms of deadlines: nanoseconds since
// epoch on the monotonic clock.
func (t *timeouts) now() int64 { return int64(time.Since(t.epoch)) }

// deadlineAfter returns the deadline d after now (from t.now), at most
// the last one representable.
func deadlineAfter(now int64, d time.Duration) int64 {
	if int64(d) > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + int64(d)
}

// time returns a deadline as a time.
func (t *timeouts) time(deadline int64) time.Time {
	return t.epoch.Add(time.Duration(deadline))
}

// add starts the contexts' waits for their deadlines; each one's
// onTimeout is called then.
func (t *timeouts) add(cs ...*runContext) {
	if len(cs) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	first := cs[0].deadline
	for _, c := range cs {
		heap.Push(&t.heap, c)
		first = min(first, c.deadline)
	}
	if t.armed == 0 || first < t.armed {
		t.armed = first
		d := time.Duration(first - t.now())
		if t.timer == nil {
			t.timer = time.AfterFunc(d, t.fire)
		} else {
			t.timer.Reset(d)
		}
	}
}

// remove ends c's wait, if it still waits.
func (t *timeouts) remove(c *runContext) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.index >= 0 {
		heap.Remove(&t.heap, int(c.index))
	}
}

// fire ends the contexts whose deadline has come, and sets the timer for
// the next deadline.
func (t *timeouts) fire() {
	var fired []*runContext // rare: once per timeout that runs out
	t.mu.Lock()
	now := t.now()
	for len(t.heap) > 0 && t.heap[0].deadline <= now {
		fired = append(fired, heap.Pop(&t.heap).(*runContext))
	}
	t.armed = 0
	if len(t.heap) > 0 {
		t.armed = t.heap[0].deadline
		t.timer.Reset(time.Duration(t.armed - now))
	}
	t.mu.Unlock()
	for _, c := range fired {
		c.expire()
	}
}

// deadlines is a min-heap of waiting contexts by deadline
// (container/heap); each context knows its index, -1 once out.
type deadlines []*runContext

func (h deadlines) Len() int           { return len(h) }
func (h deadlines) Less(i, j int) bool { return h[i].deadline < h[j].deadline }

func (h deadlines) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = int32(i)
	h[j].index = int32(j)
}

// Push adds x, a *runContext, at the end.
func (h *deadlines) Push(x any) {
	c := x.(*runContext)
	c.index = int32(len(*h))
	*h = append(*h, c)
}

// Pop takes the last context off.
func (h *deadlines) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	c.index = -1
	return c
}
