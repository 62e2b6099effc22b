package kyu

import (
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
	heap  []*runContext // min-heap by deadline; each knows its index
	timer *time.Timer
	// armed is the deadline the timer is set for, zero when it is not set.
	armed time.Time
}

// add starts c's wait for its deadline; c.onTimeout is called then.
func (t *timeouts) add(c *runContext) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c.index = len(t.heap)
	t.heap = append(t.heap, c)
	t.up(c.index)
	if t.armed.IsZero() || c.deadline.Before(t.armed) {
		t.armed = c.deadline
		d := time.Until(c.deadline)
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
	i := c.index
	if i < 0 {
		return
	}
	last := len(t.heap) - 1
	if i != last {
		t.swap(i, last)
	}
	t.heap[last] = nil
	t.heap = t.heap[:last]
	c.index = -1
	if i != last {
		t.down(i)
		t.up(i)
	}
}

// fire ends the contexts whose deadline has come, and sets the timer for
// the next deadline.
func (t *timeouts) fire() {
	var fired []*runContext // rare: once per timeout that runs out
	t.mu.Lock()
	now := time.Now()
	for len(t.heap) > 0 && !t.heap[0].deadline.After(now) {
		fired = append(fired, t.heap[0])
		t.remove0()
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

// remove0 takes the earliest deadline off the heap; mu is held.
func (t *timeouts) remove0() {
	c := t.heap[0]
	last := len(t.heap) - 1
	t.swap(0, last)
	t.heap[last] = nil
	t.heap = t.heap[:last]
	c.index = -1
	t.down(0)
}

func (t *timeouts) less(i, j int) bool { return t.heap[i].deadline.Before(t.heap[j].deadline) }

func (t *timeouts) swap(i, j int) {
	t.heap[i], t.heap[j] = t.heap[j], t.heap[i]
	t.heap[i].index = i
	t.heap[j].index = j
}

func (t *timeouts) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.less(i, p) {
			return
		}
		t.swap(i, p)
		i = p
	}
}

func (t *timeouts) down(i int) {
	n := len(t.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && t.less(r, l) {
			m = r
		}
		if !t.less(m, i) {
			return
		}
		t.swap(i, m)
		i = m
	}
}
