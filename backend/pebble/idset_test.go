package pebble

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// TestIDSetMatchesSortedSlice applies random adds and removes (in order,
// in reverse and at random, as queues fill and drain) to an idSet and to
// a sorted slice, and checks that both hold the same ids and that
// iteration from any point in either direction agrees.
func TestIDSetMatchesSortedSlice(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 7))
	mk := func(n uint32) jobID {
		var id jobID
		id[0], id[1], id[2], id[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
		return id
	}
	var s idSet
	var ref []jobID
	check := func(step int) {
		t.Helper()
		if s.len() != len(ref) {
			t.Fatalf("step %d: len %d; want %d", step, s.len(), len(ref))
		}
		var got []jobID
		for it := s.iter(nil, false); it.valid(); it.next() {
			got = append(got, it.id())
		}
		if !slices.Equal(got, ref) {
			t.Fatalf("step %d: forward walk differs from the reference (%d vs %d ids)", step, len(got), len(ref))
		}
		probe := mk(rng.Uint32N(5000))
		after := probe
		var fwd, rev []jobID
		for it := s.iter(&after, false); it.valid(); it.next() {
			fwd = append(fwd, it.id())
		}
		for it := s.iter(&after, true); it.valid(); it.next() {
			rev = append(rev, it.id())
		}
		k, found := slices.BinarySearchFunc(ref, probe, compareID)
		wantFwd := ref[k:]
		if found {
			wantFwd = ref[k+1:]
		}
		wantRev := slices.Clone(ref[:k])
		slices.Reverse(wantRev)
		if !slices.Equal(fwd, wantFwd) || !slices.Equal(rev, wantRev) {
			t.Fatalf("step %d: walks after %x: %d forward, %d reverse; want %d, %d", step, probe[:4], len(fwd), len(rev), len(wantFwd), len(wantRev))
		}
	}
	next := uint32(0)
	for step := range 4000 {
		switch op := rng.IntN(10); {
		case op < 4: // append in id order
			for range rng.IntN(300) {
				id := mk(next)
				next += 1 + rng.Uint32N(2)
				s.add(id)
				if k, found := slices.BinarySearchFunc(ref, id, compareID); !found {
					ref = slices.Insert(ref, k, id)
				}
			}
		case op < 6: // random inserts
			for range rng.IntN(50) {
				id := mk(rng.Uint32N(next + 1))
				s.add(id)
				if k, found := slices.BinarySearchFunc(ref, id, compareID); !found {
					ref = slices.Insert(ref, k, id)
				}
			}
		case op < 8 && len(ref) > 0: // drain from the front
			for range min(len(ref), rng.IntN(300)) {
				s.remove(ref[0])
				ref = ref[1:]
			}
		default: // random removes, some of absent ids
			for range rng.IntN(100) {
				id := mk(rng.Uint32N(next + 1))
				s.remove(id)
				if k, found := slices.BinarySearchFunc(ref, id, compareID); found {
					ref = slices.Delete(ref, k, k+1)
				}
			}
		}
		if step%50 == 0 {
			check(step)
		}
	}
	check(-1)
}

// TestMergeIterOrders merges three disjoint sets and walks them both ways.
func TestMergeIterOrders(t *testing.T) {
	t.Parallel()
	var sets [3]idSet
	var all []jobID
	for i := range 900 {
		id := jobID{byte(i >> 8), byte(i)}
		sets[i%3].add(id)
		all = append(all, id)
	}
	ptrs := []*idSet{&sets[0], &sets[1], &sets[2]}
	after := all[100]
	m := newMergeIter(ptrs, &after, false)
	var got []jobID
	for id, ok := m.next(); ok; id, ok = m.next() {
		got = append(got, id)
	}
	if !slices.Equal(got, all[101:]) {
		t.Fatalf("forward merge after id 100 gave %d ids; want %d in order", len(got), len(all)-101)
	}
	m = newMergeIter(ptrs, nil, true)
	got = got[:0]
	for id, ok := m.next(); ok; id, ok = m.next() {
		got = append(got, id)
	}
	want := slices.Clone(all)
	slices.Reverse(want)
	if !slices.Equal(got, want) {
		t.Fatal("reverse merge is not in reverse id order")
	}
}

// A set that empties and refills one id at a time, as an idle queue's
// pending jobs do, does not allocate a whole chunk each time; a set
// filled in order still ends in full chunks of exactly idChunk ids.
func TestIDSetSmallFirstChunk(t *testing.T) {
	mk := func(n uint64) jobID {
		var id jobID
		binary.BigEndian.PutUint64(id[:8], n)
		return id
	}
	var s idSet
	const cycles = 1000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range uint64(cycles) {
		s.add(mk(i))
		s.remove(mk(i))
	}
	runtime.ReadMemStats(&after)
	if perCycle := (after.TotalAlloc - before.TotalAlloc) / cycles; perCycle > 512 {
		t.Errorf("an add and a remove on an empty set allocate %d bytes; want at most 512", perCycle)
	}

	const n = 5*idChunk + 3
	for i := range uint64(n) {
		s.add(mk(i))
	}
	for i, c := range s.chunks[:len(s.chunks)-1] {
		if len(c) != idChunk || cap(c) != idChunk {
			t.Errorf("chunk %d of a set filled in order: len %d, cap %d; want %d, %d", i, len(c), cap(c), idChunk, idChunk)
		}
	}
	if s.len() != n {
		t.Errorf("len %d; want %d", s.len(), n)
	}
}

// Ids added nearly in order, as completions arrive (each worker's batch in
// order, the batches of several workers interleaved), fill the set's
// chunks instead of leaving the halves of split ones.
func TestIDSetNearlyInOrderStaysFull(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 3))
	mk := func(n uint64) jobID {
		var id jobID
		binary.BigEndian.PutUint64(id[:8], n)
		return id
	}
	const n, batch, workers = 100_000, 100, 4
	var s idSet
	for from := uint64(0); from < n; from += batch * workers {
		// Each worker claimed batch ids in a row; they finish in any
		// order, and each completes its batch in order.
		order := rng.Perm(workers)
		for _, w := range order {
			for i := range uint64(batch) {
				s.add(mk(from + uint64(w)*batch + i))
			}
		}
	}
	if s.len() != n {
		t.Fatalf("len %d; want %d", s.len(), n)
	}
	room := 0
	for _, c := range s.chunks {
		room += cap(c)
	}
	if fill := float64(n) / float64(room); fill < 0.9 {
		t.Errorf("the chunks are %.0f %% full (%d ids in room for %d); want at least 90 %%", 100*fill, n, room)
	}
}
