package kyu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
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
		parts := f.claimPlan(50)
		if len(parts) != 1 || parts[0].room != -1 {
			t.Fatalf("claimPlan gave %+v; want one call", parts)
		}
		order := f.names[parts[0].from:parts[0].to]
		sorted := slices.Sorted(slices.Values(order))
		if !slices.Equal(sorted, []string{"critical", "default", "low"}) {
			t.Fatalf("claimPlan gave %v; want each queue once", order)
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

// plan renders a claim plan as "[a b] [c]≤2": the queues of each call,
// and the room a cap leaves when it bounds the call.
func plan(f *fetcher, n int32) string {
	var b strings.Builder
	for i, p := range f.claimPlan(n) {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprint(&b, f.names[p.from:p.to])
		if p.room >= 0 {
			fmt.Fprintf(&b, "≤%d", p.room)
		}
	}
	return b.String()
}

// Strict order is the configured order, every time, in one call.
func TestStrictOrderIsConfigured(t *testing.T) {
	t.Parallel()
	f := &fetcher{queues: []*poolQueue{{name: "a"}, {name: "b"}, {name: "c"}}}
	for range 100 {
		if got := plan(f, 10); got != "[a b c]" {
			t.Fatalf("strict claimPlan gave %s; want [a b c]", got)
		}
	}
}

// A queue at its cap is left out of the claim; one whose cap leaves it
// less room than the claim's size is asked alone, for no more than its
// room, in its place in the order; a cap with room enough changes nothing.
func TestClaimPlanKeepsCaps(t *testing.T) {
	t.Parallel()
	slow := &poolQueue{name: "slow", max: 3}
	f := &fetcher{queues: []*poolQueue{{name: "first"}, slow, {name: "fast"}, {name: "last"}}}
	s := newSlots(10, 0)
	if got, want := plan(f, 3), "[first slow fast last]"; got != want {
		t.Fatalf("claim of 3 with slow's cap 3 free: plan %s; want %s", got, want)
	}
	for room := int32(3); room > 0; room-- {
		want := fmt.Sprintf("[first] [slow]≤%d [fast last]", room)
		if got := plan(f, 10); got != want {
			t.Fatalf("with %d of slow's 3 slots taken: plan %s; want %s", slow.taken.Load(), got, want)
		}
		s.acquire(slow)
	}
	if got, want := plan(f, 10), "[first fast last]"; got != want {
		t.Fatalf("with slow at its cap: plan %s; want %s", got, want)
	}
	// A slot given back makes the fetcher claim again, slow included.
	s.release(slow)
	if !s.uncapped.Load() {
		t.Fatal("a slot of a queue at its cap came back without telling the fetcher")
	}
	if got, want := plan(f, 10), "[first] [slow]≤1 [fast last]"; got != want {
		t.Fatalf("after a release: plan %s; want %s", got, want)
	}
	// Every queue at its cap: no call.
	f.queues = []*poolQueue{{name: "full", max: 1}}
	s.acquire(f.queues[0])
	if got := plan(f, 10); got != "" {
		t.Fatalf("with every queue at its cap: plan %s; want no call", got)
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
