package kyu

import (
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
// Only the monotonic reading of epoch counts: its wall-clock reading goes
// stale when the wall clock is stepped, so a deadline is given as a time
// from the wall clock's present reading (see time).
type timeouts struct {
	// epoch is the origin of the deadlines, set by NewWorker.
	epoch time.Time
	// wall reads the wall clock for time; nil means time.Now. A test sets
	// it to step the wall clock.
	wall func() time.Time

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

// time returns a deadline as a time: the present plus what is left until
// the deadline on the monotonic clock, so that both of the time's
// readings are right even after the wall clock has been stepped since
// epoch (epoch.Add(deadline) would be off by the step on the wall clock).
// Each call reads the clock once, which only a handler's ctx.Deadline
// does, not the worker for each job.
func (t *timeouts) time(deadline int64) time.Time {
	now := time.Now()
	left := time.Duration(deadline) - now.Sub(t.epoch) // monotonic
	if t.wall != nil {
		now = t.wall()
	}
	return now.Add(left)
}

// add starts the contexts' waits for their deadlines; each one's
// onTimeout is called then.
func (t *timeouts) add(cs ...*runContext) {
	if len(cs) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	first := cs[0].deadline.Load()
	for _, c := range cs {
		t.heap.push(c)
		first = min(first, c.deadline.Load())
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
	if c.index >= 0 {
		t.heap.remove(int(c.index))
	}
	t.mu.Unlock()
}

// fire ends the contexts whose deadline has come, and sets the timer for
// the next deadline.
func (t *timeouts) fire() {
	var fired []*runContext // rare: once per timeout that runs out
	t.mu.Lock()
	now := t.now()
	for len(t.heap) > 0 && t.heap[0].deadline.Load() <= now {
		fired = append(fired, t.heap.remove(0))
	}
	t.armed = 0
	if len(t.heap) > 0 {
		t.armed = t.heap[0].deadline.Load()
		t.timer.Reset(time.Duration(t.armed - now))
	}
	t.mu.Unlock()
	for _, c := range fired {
		c.expire()
	}
}

// deadlines is a binary min-heap of waiting contexts by deadline; each
// context knows its index, -1 once out. It is written out for its one
// element type rather than through container/heap, whose method calls
// through an interface cost more than the comparisons they make.
type deadlines []*runContext

// push adds c.
func (h *deadlines) push(c *runContext) {
	*h = append(*h, c)
	h.up(len(*h) - 1)
}

// remove takes out and returns the context at index i (0: the earliest).
func (h *deadlines) remove(i int) *runContext {
	s := *h
	c := s[i]
	last := len(s) - 1
	s[i] = s[last]
	s[last] = nil
	*h = s[:last]
	if i < last && !h.down(i) {
		h.up(i)
	}
	c.index = -1
	return c
}

// set puts c at index i.
func (h deadlines) set(i int, c *runContext) {
	h[i] = c
	c.index = int32(i)
}

// up moves the context at i towards the root to its place.
func (h deadlines) up(i int) {
	c := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if h[p].deadline.Load() <= c.deadline.Load() {
			break
		}
		h.set(i, h[p])
		i = p
	}
	h.set(i, c)
}

// down moves the context at i towards the leaves to its place, and
// reports whether it moved.
func (h deadlines) down(i int) bool {
	c, start := h[i], i
	for {
		m := 2*i + 1
		if m >= len(h) {
			break
		}
		if r := m + 1; r < len(h) && h[r].deadline.Load() < h[m].deadline.Load() {
			m = r
		}
		if h[m].deadline.Load() >= c.deadline.Load() {
			break
		}
		h.set(i, h[m])
		i = m
	}
	h.set(i, c)
	return i > start
}
