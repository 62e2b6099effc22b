package kyu

import (
	"container/heap"
	"sync"
	"time"
)

// timeouts ends handlers' contexts at their jobs' timeouts with one timer
// for the whole worker instead of one per job: the running jobs' contexts
// wait in a heap ordered by deadline, and the timer is set for the
// earliest. A job that ends before its deadline leaves the heap; the timer
// is not moved for it, and when it fires for a deadline no longer waiting
// it is set for the next one.
type timeouts struct {
	mu    sync.Mutex
	heap  deadlines
	timer *time.Timer
	// armed is the deadline the timer is set for, zero when it is not set.
	armed time.Time
}

// add starts the contexts' waits for their deadlines; each one's
// onTimeout is called then.
func (t *timeouts) add(cs ...*runContext) {
	if len(cs) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var first time.Time
	for _, c := range cs {
		heap.Push(&t.heap, c)
		if first.IsZero() || c.deadline.Before(first) {
			first = c.deadline
		}
	}
	if !first.IsZero() && (t.armed.IsZero() || first.Before(t.armed)) {
		t.armed = first
		d := time.Until(first)
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
		heap.Remove(&t.heap, c.index)
	}
}

// fire ends the contexts whose deadline has come, and sets the timer for
// the next deadline.
func (t *timeouts) fire() {
	var fired []*runContext // rare: once per timeout that runs out
	t.mu.Lock()
	now := time.Now()
	for len(t.heap) > 0 && !t.heap[0].deadline.After(now) {
		fired = append(fired, heap.Pop(&t.heap).(*runContext))
	}
	t.armed = time.Time{}
	if len(t.heap) > 0 {
		t.armed = t.heap[0].deadline
		t.timer.Reset(t.armed.Sub(now))
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
func (h deadlines) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }

func (h deadlines) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

// Push adds x, a *runContext, at the end.
func (h *deadlines) Push(x any) {
	c := x.(*runContext)
	c.index = len(*h)
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
