package pebble

import (
	"encoding/binary"
	"slices"
	"sort"
)

// idSet is an ordered set of job ids, kept as a list of sorted chunks of at
// most idChunk ids. Ids are UUIDv7, so new jobs land at the end and a FIFO
// queue drains from the front: both touch one chunk. A set costs about 16
// bytes per id plus the chunks' slack (chunks filled in order stay full;
// splits leave halves), and no pointers per id.
type idSet struct {
	chunks [][]jobID
	n      int
}

// idChunk is the most ids one chunk holds.
const idChunk = 256

// compareID orders ids as bytes.Compare would, in two word comparisons.
func compareID(a, b jobID) int {
	ah, bh := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])
	if ah == bh {
		ah, bh = binary.BigEndian.Uint64(a[8:]), binary.BigEndian.Uint64(b[8:])
	}
	switch {
	case ah < bh:
		return -1
	case ah > bh:
		return 1
	}
	return 0
}

// newChunk allocates a chunk: idChunk ids are exactly 4 KiB, a size class
// of the allocator, so a full chunk wastes nothing.
func newChunk() []jobID { return make([]jobID, 0, idChunk) }

// idFirstChunk is the capacity of the chunk an empty set starts with; it
// grows by doubling as it fills (to idChunk, 4 KiB, like the others). A
// set that keeps emptying and refilling, as an idle queue's pending jobs
// do one at a time, would otherwise allocate and clear 4 KiB per job.
const idFirstChunk = 4

// len is the number of ids in the set.
func (s *idSet) len() int { return s.n }

// chunkFor returns the chunk that holds id or would hold it: the first
// whose last id is not below id, else the last chunk. The set must not be
// empty.
func (s *idSet) chunkFor(id jobID) int {
	i := sort.Search(len(s.chunks), func(i int) bool {
		c := s.chunks[i]
		return compareID(c[len(c)-1], id) >= 0
	})
	if i == len(s.chunks) {
		i--
	}
	return i
}

// add inserts id; adding an id already there changes nothing.
func (s *idSet) add(id jobID) {
	if len(s.chunks) == 0 {
		s.chunks = append(s.chunks, append(make([]jobID, 0, idFirstChunk), id))
		s.n++
		return
	}
	var ci, k int
	var c []jobID
	if last := s.chunks[len(s.chunks)-1]; compareID(last[len(last)-1], id) < 0 {
		// The common case, a new job: it goes after every id.
		ci, c = len(s.chunks)-1, last
		k = len(c)
	} else {
		ci = s.chunkFor(id)
		c = s.chunks[ci]
		var found bool
		if k, found = slices.BinarySearchFunc(c, id, compareID); found {
			return
		}
	}
	s.n++
	if len(c) >= idChunk {
		if k == len(c) && ci == len(s.chunks)-1 {
			// Appending in id order: start a new chunk, leaving this one
			// full.
			s.chunks = append(s.chunks, append(newChunk(), id))
			return
		}
		if s.spill(ci, k, id) {
			return
		}
		// Split the full chunk, then insert into the half that takes id.
		half := len(c) / 2
		right := append(newChunk(), c[half:]...)
		s.chunks[ci] = c[:half]
		s.chunks = slices.Insert(s.chunks, ci+1, right)
		c = c[:half]
		if k > half {
			ci, k, c = ci+1, k-half, right
		}
	}
	s.chunks[ci] = slices.Insert(c, k, id)
}

// spill inserts id at position k of the full chunk ci without splitting
// it, when a neighbour has room: the chunk's first id moves to the end of
// the chunk before it, or its last id to the front of the chunk after it.
// Completions come in nearly, but not quite, in id order (workers finish
// their batches in their own order), so inserts land a little before the
// end; splitting every full chunk they hit left the completed set about
// 70 % full (23 MB of chunks for a million ids, not 16). It reports
// whether it inserted id. A neighbour with no spare capacity (one that a
// drain from the front resliced) is not used, so that no chunk is
// reallocated.
func (s *idSet) spill(ci, k int, id jobID) bool {
	c := s.chunks[ci]
	if ci > 0 {
		if l := s.chunks[ci-1]; len(l) < idChunk && len(l) < cap(l) {
			if k == 0 {
				s.chunks[ci-1] = append(l, id)
				return true
			}
			s.chunks[ci-1] = append(l, c[0])
			copy(c[:k-1], c[1:k])
			c[k-1] = id
			return true
		}
	}
	if ci+1 < len(s.chunks) && k < len(c) {
		if r := s.chunks[ci+1]; len(r) < idChunk && len(r) < cap(r) {
			s.chunks[ci+1] = slices.Insert(r, 0, c[len(c)-1])
			copy(c[k+1:], c[k:len(c)-1])
			c[k] = id
			return true
		}
	}
	return false
}

// remove deletes id; removing an absent id changes nothing.
func (s *idSet) remove(id jobID) {
	if len(s.chunks) == 0 {
		return
	}
	var ci, k int
	c := s.chunks[0]
	if c[0] != id {
		// Not the first id (the common case as a queue drains): search.
		ci = s.chunkFor(id)
		c = s.chunks[ci]
		var found bool
		if k, found = slices.BinarySearchFunc(c, id, compareID); !found {
			return
		}
	}
	s.n--
	if k == 0 {
		// A queue drains from the front: reslice rather than move the
		// rest of the chunk (or of the chunk list) down.
		c = c[1:]
	} else {
		c = slices.Delete(c, k, k+1)
	}
	switch {
	case len(c) == 0 && ci == 0:
		s.chunks[0] = nil
		s.chunks = s.chunks[1:]
		if len(s.chunks) == 0 {
			s.chunks = nil
		}
		return
	case len(c) == 0:
		s.chunks = slices.Delete(s.chunks, ci, ci+1)
		return
	case len(c) < idChunk/8 && ci+1 < len(s.chunks) && len(c)+len(s.chunks[ci+1]) <= idChunk:
		// Merge a nearly empty chunk into its neighbour, so that removals
		// scattered over the set cannot leave many sparse chunks.
		c = append(c, s.chunks[ci+1]...)
		s.chunks = slices.Delete(s.chunks, ci+1, ci+2)
	}
	s.chunks[ci] = c
}

// idIter walks an idSet in order or in reverse. The set must not change
// while an iterator is in use.
type idIter struct {
	s     *idSet
	ci, k int
	rev   bool
}

// iter returns an iterator at the first id after `after` in the walk's
// direction (above it, or below it when rev); at the first id of the walk
// when after is nil.
func (s *idSet) iter(after *jobID, rev bool) idIter {
	it := idIter{s: s, rev: rev}
	switch {
	case after == nil && !rev:
		it.ci, it.k = 0, 0
	case after == nil:
		it.ci = len(s.chunks) - 1
		if it.ci >= 0 {
			it.k = len(s.chunks[it.ci]) - 1
		}
	case !rev:
		// The first chunk whose last id is above after, then the first id
		// above after in it.
		it.ci = sort.Search(len(s.chunks), func(i int) bool {
			c := s.chunks[i]
			return compareID(c[len(c)-1], *after) > 0
		})
		if it.ci < len(s.chunks) {
			c := s.chunks[it.ci]
			k, found := slices.BinarySearchFunc(c, *after, compareID)
			if found {
				k++
			}
			it.k = k
		}
	default:
		// The last chunk whose first id is below after, then the last id
		// below after in it.
		it.ci = sort.Search(len(s.chunks), func(i int) bool {
			return compareID(s.chunks[i][0], *after) >= 0
		}) - 1
		if it.ci >= 0 {
			c := s.chunks[it.ci]
			k, _ := slices.BinarySearchFunc(c, *after, compareID)
			it.k = k - 1
		}
	}
	return it
}

// valid reports whether the iterator is at an id.
func (it *idIter) valid() bool {
	return it.ci >= 0 && it.ci < len(it.s.chunks) && it.k >= 0 && it.k < len(it.s.chunks[it.ci])
}

// id is the id the iterator is at; valid must be true.
func (it *idIter) id() jobID { return it.s.chunks[it.ci][it.k] }

// next moves one id on in the walk's direction.
func (it *idIter) next() {
	if !it.rev {
		it.k++
		if it.k >= len(it.s.chunks[it.ci]) {
			it.ci++
			it.k = 0
		}
		return
	}
	it.k--
	if it.k < 0 {
		it.ci--
		if it.ci >= 0 {
			it.k = len(it.s.chunks[it.ci]) - 1
		}
	}
}

// mergeIter walks several disjoint idSets as one, in id order or in
// reverse.
type mergeIter struct {
	its []idIter
	rev bool
}

func newMergeIter(sets []*idSet, after *jobID, rev bool) *mergeIter {
	m := &mergeIter{rev: rev}
	for _, s := range sets {
		if it := s.iter(after, rev); it.valid() {
			m.its = append(m.its, it)
		}
	}
	return m
}

// next returns the next id of the walk; ok is false at the end.
func (m *mergeIter) next() (id jobID, ok bool) {
	best := -1
	for i := range m.its {
		if best < 0 {
			best = i
			continue
		}
		c := compareID(m.its[i].id(), m.its[best].id())
		if (!m.rev && c < 0) || (m.rev && c > 0) {
			best = i
		}
	}
	if best < 0 {
		return jobID{}, false
	}
	it := &m.its[best]
	id = it.id()
	it.next()
	if !it.valid() {
		m.its = slices.Delete(m.its, best, best+1)
	}
	return id, true
}

// contains reports whether id is in the set.
func (s *idSet) contains(id jobID) bool {
	if len(s.chunks) == 0 {
		return false
	}
	_, found := slices.BinarySearchFunc(s.chunks[s.chunkFor(id)], id, compareID)
	return found
}
