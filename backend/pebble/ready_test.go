package pebble

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestReadyQueueOrder pushes, pops, filters and removes random entries and
// checks every pop against a sorted model: priority (higher first), run-at,
// id. The entries come in random order, or mostly in claim order (as jobs
// enqueued one after another do), which the queue keeps apart from its
// heaps.
func TestReadyQueueOrder(t *testing.T) {
	t.Run("random", func(t *testing.T) { testReadyQueueOrder(t, false) })
	t.Run("ascending", func(t *testing.T) { testReadyQueueOrder(t, true) })
}

func testReadyQueueOrder(t *testing.T, ascending bool) {
	rng := rand.New(rand.NewPCG(1, 2))
	clock := int64(0)
	var r readyQueue
	var model []readyEntry
	claimOrder := func(a, b readyEntry) int {
		switch {
		case a.prio != b.prio:
			return int(b.prio) - int(a.prio)
		case a.runAt < b.runAt:
			return -1
		case a.runAt > b.runAt:
			return 1
		}
		return bytes.Compare(a.id[:], b.id[:])
	}
	for step := range 40000 {
		pushes := 6
		if ascending {
			pushes = 2 // long runs build up, then drain
			if step%8000 < 4000 {
				pushes = 9
			}
		}
		switch op := rng.IntN(10); {
		case op < pushes:
			var e readyEntry
			e.prio = int8(rng.IntN(5) - 2)
			e.runAt = int64(rng.IntN(100))
			if ascending {
				e.prio = int8(rng.IntN(2))
				clock += int64(rng.IntN(2))
				e.runAt = clock
				if rng.IntN(50) == 0 {
					e.runAt -= int64(rng.IntN(100)) // now and then out of order
				}
			}
			for i := range e.id {
				e.id[i] = byte(rng.IntN(256))
			}
			r.push(e)
			model = append(model, e)
		case op < 9 && len(model) > 0:
			slices.SortFunc(model, claimOrder)
			if got := r.pop(); got != model[0] {
				t.Fatalf("step %d: pop %+v; want %+v", step, got, model[0])
			}
			model = model[1:]
		case op == 9 && len(model) > 0 && rng.IntN(20) == 0 && (!ascending || rng.IntN(20) == 0):
			r.filter(func(e readyEntry) bool { return e.runAt%3 != 0 })
			model = slices.DeleteFunc(model, func(e readyEntry) bool { return e.runAt%3 == 0 })
		case op == 9 && len(model) > 0:
			p := r.earliest()
			e := r.at(p)
			for _, m := range model {
				if m.runAt < e.runAt {
					t.Fatalf("step %d: earliest run-at %d; %d is earlier", step, e.runAt, m.runAt)
				}
			}
			r.removeAt(p)
			i := slices.Index(model, e)
			if i < 0 {
				t.Fatalf("step %d: earliest %+v is not in the model", step, e)
			}
			model = slices.Delete(model, i, i+1)
		}
		if r.len() != len(model) {
			t.Fatalf("step %d: len %d; want %d", step, r.len(), len(model))
		}
	}
}
