package kyu

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Over 10,000 weighted claims, each queue comes first in the claim's
// order in proportion to its weight: within 2 percentage points of its
// share (the source is seeded, so the test is deterministic; with a
// random seed the bound is over 4 standard deviations for every queue).
func TestWeightedOrderMatchesWeights(t *testing.T) {
	t.Parallel()
	f := &fetcher{
		queues: []*poolQueue{
			{name: "critical", weight: 6},
			{name: "default", weight: 3},
			{name: "low", weight: 1},
		},
		weighted: true,
		rng:      rand.New(rand.NewPCG(14, 1)),
	}
	const claims = 10_000
	first := map[string]int{}
	for range claims {
		order, n := f.claimOrder(50)
		if n != 50 || len(order) != 3 {
			t.Fatalf("claimOrder gave %v, max %d; want all three queues and 50", order, n)
		}
		sorted := slices.Sorted(slices.Values(order))
		if !slices.Equal(sorted, []string{"critical", "default", "low"}) {
			t.Fatalf("claimOrder gave %v; want each queue once", order)
		}
		first[order[0]]++
	}
	for _, q := range f.queues {
		want := float64(q.weight) / 10
		got := float64(first[q.name]) / claims
		if got < want-0.02 || got > want+0.02 {
			t.Errorf("queue %s (weight %d) came first in %.3f of claims; want %.2f±0.02", q.name, q.weight, got, want)
		}
	}
}

// Strict order is the configured order, every time.
func TestStrictOrderIsConfigured(t *testing.T) {
	t.Parallel()
	f := &fetcher{queues: []*poolQueue{{name: "a"}, {name: "b"}, {name: "c"}}}
	for range 100 {
		if order, _ := f.claimOrder(10); !slices.Equal(order, []string{"a", "b", "c"}) {
			t.Fatalf("strict claimOrder gave %v; want [a b c]", order)
		}
	}
}

// A queue at its cap is left out of the claim, and the claim takes no more
// jobs than the smallest room left under a cap of the queues it asks.
func TestClaimOrderKeepsCaps(t *testing.T) {
	t.Parallel()
	capped := &poolQueue{name: "slow", max: 3}
	f := &fetcher{queues: []*poolQueue{capped, {name: "fast"}}}
	s := newSlots(10)
	for want := int32(3); want > 0; want-- {
		order, n := f.claimOrder(10)
		if !slices.Equal(order, []string{"slow", "fast"}) || n != want {
			t.Fatalf("with %d of slow's 3 slots taken: claimOrder gave %v, max %d; want [slow fast], max %d",
				capped.taken.Load(), order, n, want)
		}
		s.acquire(capped)
	}
	if order, n := f.claimOrder(10); !slices.Equal(order, []string{"fast"}) || n != 10 {
		t.Fatalf("with slow at its cap: claimOrder gave %v, max %d; want [fast], max 10", order, n)
	}
	// A slot given back makes the fetcher claim again, slow included.
	s.release(capped)
	if !s.uncapped.Load() {
		t.Fatal("a slot of a queue at its cap came back without telling the fetcher")
	}
	if order, n := f.claimOrder(10); !slices.Equal(order, []string{"slow", "fast"}) || n != 1 {
		t.Fatalf("after a release: claimOrder gave %v, max %d; want [slow fast], max 1", order, n)
	}
}

// The run's transitions: each happens once and only from the states it
// names, and what the handler returns is kept or dropped accordingly.
func TestRunStateTransitions(t *testing.T) {
	t.Parallel()
	type step struct {
		name string
		do   func(m *runMachine) bool
	}
	var (
		start   = step{"start", func(m *runMachine) bool { m.start(); return true }}
		cancel  = step{"requestCancel", (*runMachine).requestCancel}
		lose    = step{"loseLease", (*runMachine).loseLease}
		expire  = step{"expireLease", (*runMachine).expireLease}
		abandon = step{"abandon", (*runMachine).abandon}
		timeOut = step{"timeOut", (*runMachine).timeOut}
	)
	for _, tc := range []struct {
		steps  []step
		want   []bool
		failed bool
		end    runState
	}{
		{[]step{start}, []bool{true}, false, runFinished},
		{[]step{start}, []bool{true}, true, runFinished},
		{[]step{start, cancel, cancel}, []bool{true, true, false}, true, runFinished},
		{[]step{start, lose, lose, cancel}, []bool{true, true, false, false}, false, runFinished},
		{[]step{start, lose}, []bool{true, true}, true, runDropped},
		{[]step{start, cancel, lose, expire}, []bool{true, true, true, false}, true, runDropped},
		{[]step{start, expire, expire, lose}, []bool{true, true, false, false}, false, runDropped},
		{[]step{start, abandon, abandon, timeOut}, []bool{true, true, false, false}, false, runAbandoned},
		{[]step{start, lose, timeOut, abandon}, []bool{true, true, true, false}, false, runTimedOut},
		{[]step{abandon, start}, []bool{true, true}, false, runAbandoned},
	} {
		var m runMachine
		var names []string
		for i, s := range tc.steps {
			names = append(names, s.name)
			if got := s.do(&m); got != tc.want[i] {
				t.Errorf("%v: step %d (%s) gave %v, want %v", names, i, s.name, got, tc.want[i])
			}
		}
		if got := m.returned(tc.failed); got != tc.end {
			t.Errorf("%v then returned(failed=%v): %s, want %s", names, tc.failed, got, tc.end)
		}
		m.record()
		if m.load() != runRecorded {
			t.Errorf("%v: record left the run %s", names, m.load())
		}
	}
}
