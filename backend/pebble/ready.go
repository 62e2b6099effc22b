package pebble

import "slices"

// readyQueue holds a queue's pending jobs in claim order: priority
// (higher first), run-at (earlier first), id. It keeps one heap of
// (run-at, id) per priority that has jobs, so that an entry costs 24
// bytes, not the 32 a heap of entries carrying their priority would
// (a million pending jobs: 24 MB of heap instead of 32).
type readyQueue struct {
	// levels are the priorities with entries, highest first.
	levels []readyLevel
	n      int
}

// readyLevel is the heap of one priority's entries.
type readyLevel struct {
	prio int8
	heap minHeap[timeEntry]
}

func (r *readyQueue) len() int { return r.n }

// push adds an entry.
func (r *readyQueue) push(e readyEntry) {
	i, found := slices.BinarySearchFunc(r.levels, e.prio, func(l readyLevel, p int8) int {
		return int(p) - int(l.prio) // highest first
	})
	if !found {
		r.levels = slices.Insert(r.levels, i, readyLevel{prio: e.prio})
	}
	r.levels[i].heap.push(timeEntry{at: e.runAt, id: e.id})
	r.n++
}

// pop removes and returns the first entry; the queue must not be empty.
func (r *readyQueue) pop() readyEntry {
	l := &r.levels[0]
	t := l.heap.pop()
	e := readyEntry{runAt: t.at, id: t.id, prio: l.prio}
	r.n--
	if l.heap.len() == 0 {
		r.levels = slices.Delete(r.levels, 0, 1)
	}
	return e
}

// filter keeps the entries for which keep is true.
func (r *readyQueue) filter(keep func(readyEntry) bool) {
	r.n = 0
	for i := range r.levels {
		l := &r.levels[i]
		l.heap.filter(func(t timeEntry) bool { return keep(readyEntry{runAt: t.at, id: t.id, prio: l.prio}) })
		l.heap.shrink()
		r.n += l.heap.len()
	}
	r.levels = slices.DeleteFunc(r.levels, func(l readyLevel) bool { return l.heap.len() == 0 })
}

// readyPos is where an entry is in a readyQueue, until the queue changes.
type readyPos struct{ level, i int }

// earliest returns the position of an entry with the earliest run-at;
// the queue must not be empty.
func (r *readyQueue) earliest() readyPos {
	best := readyPos{level: -1}
	var at int64
	for li := range r.levels {
		for i, t := range r.levels[li].heap.items {
			if best.level < 0 || t.at < at {
				best, at = readyPos{li, i}, t.at
			}
		}
	}
	return best
}

// at returns the entry at p.
func (r *readyQueue) at(p readyPos) readyEntry {
	l := &r.levels[p.level]
	t := l.heap.items[p.i]
	return readyEntry{runAt: t.at, id: t.id, prio: l.prio}
}

// removeAt removes the entry at p.
func (r *readyQueue) removeAt(p readyPos) {
	l := &r.levels[p.level]
	l.heap.removeAt(p.i)
	r.n--
	if l.heap.len() == 0 {
		r.levels = slices.Delete(r.levels, p.level, p.level+1)
	}
}
