package pebble

import "slices"

// readyQueue holds a queue's pending jobs in claim order: priority
// (higher first), run-at (earlier first), id. It keeps one heap of
// (run-at, id) per priority that has jobs, so that an entry costs 24
// bytes, not the 32 a heap of entries carrying their priority would
// (a million pending jobs: 24 MB of heap instead of 32).
//
// Each priority keeps, besides its heap, a run: entries pushed in claim
// order after the run's last one (jobs enqueued one after another, the
// common case) are appended there and popped from its front, in constant
// time and without the heap's dozen comparisons and swaps per entry; the
// rest go to the heap, and pop takes the earlier of the two fronts.
type readyQueue struct {
	// levels are the priorities with entries, highest first.
	levels []readyLevel
	n      int
}

// readyLevel holds one priority's entries: run[head:] in order, and the
// heap for those pushed out of order.
type readyLevel struct {
	prio int8
	heap minHeap[timeEntry]
	run  []timeEntry
	head int
}

// len is how many entries the level holds.
func (l *readyLevel) len() int { return l.heap.len() + len(l.run) - l.head }

// push adds an entry: to the run when it comes after the run's last.
func (l *readyLevel) push(t timeEntry) {
	if len(l.run) == l.head || !t.before(l.run[len(l.run)-1]) {
		l.run = append(l.run, t)
		return
	}
	l.heap.push(t)
}

// pop removes and returns the first entry; the level must not be empty.
func (l *readyLevel) pop() timeEntry {
	if l.head == len(l.run) || (l.heap.len() > 0 && l.heap.peek().before(l.run[l.head])) {
		return l.heap.pop()
	}
	t := l.run[l.head]
	l.run[l.head] = timeEntry{}
	l.head++
	l.compact()
	return t
}

// compact moves the run to the front of its array once more than half of
// it is popped, and gives memory back like minHeap.shrink.
func (l *readyLevel) compact() {
	n := len(l.run) - l.head
	switch {
	case n == 0:
		l.run, l.head = l.run[:0], 0
		if cap(l.run) > 1024 {
			l.run = nil
		}
	case l.head > 1024 && l.head > n:
		size := cap(l.run)
		if size > 1024 && n < size/4 {
			size = max(2*n, 1024)
		}
		run := l.run[l.head:]
		if size == cap(l.run) {
			copy(l.run, run)
			clear(l.run[n:])
			l.run = l.run[:n]
		} else {
			l.run = append(make([]timeEntry, 0, size), run...)
		}
		l.head = 0
	}
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
	r.levels[i].push(timeEntry{at: e.runAt, id: e.id})
	r.n++
}

// pop removes and returns the first entry; the queue must not be empty.
func (r *readyQueue) pop() readyEntry {
	l := &r.levels[0]
	t := l.pop()
	e := readyEntry{runAt: t.at, id: t.id, prio: l.prio}
	r.n--
	if l.len() == 0 {
		r.levels = slices.Delete(r.levels, 0, 1)
	}
	return e
}

// peek appends to ids the ids of up to n entries from the front, in
// claim order, and returns it. It stops at a level whose heap holds
// entries (pushed out of order), after the front of its run: the ids are
// a guess at what the next pops return, not always all of them.
func (r *readyQueue) peek(ids []jobID, n int) []jobID {
	for li := range r.levels {
		l := &r.levels[li]
		for _, t := range l.run[l.head:min(len(l.run), l.head+n)] {
			ids = append(ids, t.id)
			n--
		}
		if n <= 0 || l.heap.len() > 0 {
			break
		}
	}
	return ids
}

// filter keeps the entries for which keep is true.
func (r *readyQueue) filter(keep func(readyEntry) bool) {
	r.n = 0
	for i := range r.levels {
		l := &r.levels[i]
		keepTime := func(t timeEntry) bool { return keep(readyEntry{runAt: t.at, id: t.id, prio: l.prio}) }
		l.heap.filter(keepTime)
		l.heap.shrink()
		run := slices.DeleteFunc(l.run[l.head:], func(t timeEntry) bool { return !keepTime(t) })
		n := copy(l.run, run)
		clear(l.run[n:])
		l.run, l.head = l.run[:n], 0
		l.compact()
		r.n += l.len()
	}
	r.levels = slices.DeleteFunc(r.levels, func(l readyLevel) bool { return l.len() == 0 })
}

// readyPos is where an entry is in a readyQueue, until the queue changes:
// the level, and the index in its heap, or in its run when inRun is set.
type readyPos struct {
	level, i int
	inRun    bool
}

// earliest returns the position of an entry with the earliest run-at;
// the queue must not be empty.
func (r *readyQueue) earliest() readyPos {
	best := readyPos{level: -1}
	var at int64
	for li := range r.levels {
		l := &r.levels[li]
		for i, t := range l.heap.items {
			if best.level < 0 || t.at < at {
				best, at = readyPos{level: li, i: i}, t.at
			}
		}
		if l.head < len(l.run) { // the run's first is its earliest
			if t := l.run[l.head]; best.level < 0 || t.at < at {
				best, at = readyPos{level: li, i: l.head, inRun: true}, t.at
			}
		}
	}
	return best
}

// at returns the entry at p.
func (r *readyQueue) at(p readyPos) readyEntry {
	l := &r.levels[p.level]
	var t timeEntry
	if p.inRun {
		t = l.run[p.i]
	} else {
		t = l.heap.items[p.i]
	}
	return readyEntry{runAt: t.at, id: t.id, prio: l.prio}
}

// removeAt removes the entry at p.
func (r *readyQueue) removeAt(p readyPos) {
	l := &r.levels[p.level]
	if p.inRun {
		l.run = slices.Delete(l.run, p.i, p.i+1)
		l.compact()
	} else {
		l.heap.removeAt(p.i)
	}
	r.n--
	if l.len() == 0 {
		r.levels = slices.Delete(r.levels, p.level, p.level+1)
	}
}
