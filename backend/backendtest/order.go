package backendtest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

func testOrder(t *testing.T, factory Factory) {
	// mixed enqueues jobs of cycling priorities and returns their ids in the
	// order Claim must hand them out: priority, then enqueue order.
	mixed := func(f *fixture, n int, tick time.Duration) []string {
		f.t.Helper()
		prios := []int{0, 5, -3, 100, 5, -100, 0}
		type entry struct {
			id   string
			prio int
		}
		var all []entry
		for i := range n {
			p := prios[i%len(prios)]
			all = append(all, entry{f.enqueueOne(backend.NewJob{Priority: p, Title: fmt.Sprint(i)}), p})
			f.advance(tick)
		}
		slices.SortStableFunc(all, func(a, b entry) int { return b.prio - a.prio })
		ids := make([]string, n)
		for i, e := range all {
			ids[i] = e.id
		}
		return ids
	}

	t.Run("PriorityThenFIFO", func(t *testing.T) {
		f := start(t, factory)
		want := mixed(f, 30, time.Millisecond)
		for i, id := range want {
			f.claimID(id, fmt.Sprintf("claim %d: higher priority first, then first enqueued first", i))
		}
		f.claimNothing("every job was claimed")
	})

	t.Run("FIFOWithinTheSameMillisecond", func(t *testing.T) {
		// Jobs enqueued one after another at the same Now keep enqueue order.
		f := start(t, factory)
		want := mixed(f, 30, 0)
		for i, id := range want {
			f.claimID(id, fmt.Sprintf("claim %d: jobs enqueued at the same Now go in enqueue order", i))
		}
	})

	t.Run("BatchOrder", func(t *testing.T) {
		f := start(t, factory)
		var jobs []backend.NewJob
		for i := range 20 {
			jobs = append(jobs, backend.NewJob{Title: fmt.Sprint(i)})
		}
		res := f.enqueue(jobs...)
		for i, r := range res {
			f.claimID(r.ID, fmt.Sprintf("claim %d: the items of one batch go in batch order", i))
		}
	})

	t.Run("OneClaimIsOrdered", func(t *testing.T) {
		f := start(t, factory)
		want := mixed(f, 14, time.Millisecond)
		got := f.claim(len(want))
		if len(got) != len(want) {
			t.Fatalf("Claim(max %d) returned %d jobs; want all", len(want), len(got))
		}
		for i, j := range got {
			if j.ID != want[i] {
				t.Fatalf("job %d of one claim is %s (priority %d); want %s: a claim lists jobs highest priority first, FIFO within a priority",
					i, j.ID, j.Priority, want[i])
			}
		}
	})

	t.Run("RunAtBeforeEnqueueOrder", func(t *testing.T) {
		// Within a priority, an earlier RunAt goes first whatever the enqueue order.
		f := start(t, factory)
		late := f.enqueueOne(backend.NewJob{RunAt: f.now.Add(3 * time.Second)})
		early := f.enqueueOne(backend.NewJob{RunAt: f.now.Add(1 * time.Second)})
		mid := f.enqueueOne(backend.NewJob{RunAt: f.now.Add(2 * time.Second)})
		high := f.enqueueOne(backend.NewJob{RunAt: f.now.Add(4 * time.Second), Priority: 1})
		f.advance(5 * time.Second)
		f.promote()
		for i, id := range []string{high, early, mid, late} {
			f.claimID(id, fmt.Sprintf("claim %d: priority first, then earlier RunAt", i))
		}
	})

	t.Run("ReleasedJobKeepsItsPlace", func(t *testing.T) {
		f := start(t, factory)
		ids := f.enqueueN(2)
		j := f.claimID(ids[0], "first enqueued first")
		f.advance(time.Second)
		later := f.enqueueOne(backend.NewJob{})
		f.mustOK("Release", f.release(lease(j)))
		f.claimID(ids[0], "a released job keeps its RunAt and goes back to the front of its priority")
		f.claimID(ids[1], "then the rest in order")
		f.claimID(later, "then the rest in order")
	})

	t.Run("RecoveredJobKeepsItsPlace", func(t *testing.T) {
		f := start(t, factory)
		ids := f.enqueueN(2)
		f.claimID(ids[0], "first enqueued first")
		f.advance(testLease)
		later := f.enqueueOne(backend.NewJob{})
		f.recoverLeases()
		f.claimID(ids[0], "a recovered job keeps its RunAt and goes back to the front of its priority")
		f.claimID(ids[1], "then the rest in order")
		f.claimID(later, "then the rest in order")
	})
}

func testQueues(t *testing.T, factory Factory) {
	t.Run("OnlyNamedQueues", func(t *testing.T) {
		f := start(t, factory)
		other := uniqueQueue(t, "-other")
		f.enqueueOne(backend.NewJob{Queue: other, Priority: 100})
		f.claimNothing("the only job is in another queue")
		if jobs := f.claimWith(backend.ClaimParams{Queues: []string{uniqueQueue(t, "-never")}, Max: 5, Lease: testLease, Now: f.now}); len(jobs) != 0 {
			t.Fatalf("Claim from a queue nobody used returned %d jobs", len(jobs))
		}
	})

	t.Run("Strict", func(t *testing.T) {
		for _, mode := range []backend.ClaimMode{backend.ClaimStrict, ""} {
			t.Run(fmt.Sprintf("mode=%q", mode), func(t *testing.T) {
				f := start(t, factory)
				qa, qb, qc := uniqueQueue(t, "-a"), uniqueQueue(t, "-b"), uniqueQueue(t, "-c")
				// Enqueued in reverse, and the later queues with higher priorities:
				// strict order is by queue alone.
				var want []string
				for _, q := range []struct {
					name string
					prio int
				}{{qc, 100}, {qb, 50}, {qa, 0}} {
					var ids []string
					for range 3 {
						ids = append(ids, f.enqueueOne(backend.NewJob{Queue: q.name, Priority: q.prio}))
					}
					want = append(ids, want...)
				}
				p := f.claimParams(1)
				p.Queues, p.Mode = []string{qa, qb, qc}, mode
				for i, id := range want {
					got := f.claimWith(p)
					if len(got) != 1 || got[0].ID != id {
						t.Fatalf("strict claim %d returned %v; want %s: a later queue is served only when the earlier ones are empty", i, ids(got), id)
					}
				}
			})
		}
	})

	t.Run("Weighted", func(t *testing.T) {
		f := start(t, factory)
		heavy, light := uniqueQueue(t, "-heavy"), uniqueQueue(t, "-light")
		const n, claims = 450, 400
		for _, q := range []string{heavy, light} {
			jobs := make([]backend.NewJob, n)
			for i := range jobs {
				jobs[i].Queue = q
			}
			f.enqueue(jobs...)
		}
		p := f.claimParams(1)
		p.Queues, p.Mode, p.Weights = []string{light, heavy}, backend.ClaimWeighted, map[string]int{heavy: 3, light: 1}
		count := map[string]int{}
		for range claims {
			got := f.claimWith(p)
			if len(got) != 1 {
				t.Fatalf("weighted claim returned %d jobs with both queues full; want 1", len(got))
			}
			count[got[0].Queue]++
		}
		// Expected 300 from heavy; the bounds are about seven standard deviations.
		if count[heavy] < 240 || count[heavy] > 360 || count[heavy]+count[light] != claims {
			t.Fatalf("weighted 3:1 claims took %d from the heavier queue and %d from the lighter; want 240-360 of %d from the heavier",
				count[heavy], count[light], claims)
		}
	})

	t.Run("WeightedSkipsEmptyQueue", func(t *testing.T) {
		f := start(t, factory)
		heavy, light := uniqueQueue(t, "-heavy"), uniqueQueue(t, "-light")
		f.enqueueOne(backend.NewJob{Queue: heavy})
		for range 10 {
			f.enqueueOne(backend.NewJob{Queue: light})
		}
		p := f.claimParams(1)
		p.Queues, p.Mode, p.Weights = []string{heavy, light}, backend.ClaimWeighted, map[string]int{heavy: 1000, light: 1}
		for i := range 11 {
			jobs := f.claimWith(p)
			if len(jobs) != 1 {
				t.Fatalf("weighted claim %d returned %d jobs with %d jobs left; want 1: an empty queue is skipped", i, len(jobs), 11-i)
			}
		}
		if jobs := f.claimWith(p); len(jobs) != 0 {
			t.Fatalf("weighted claim returned %d jobs after all eleven were claimed", len(jobs))
		}
		// Also with no weights at all (each defaults to 1).
		f.enqueueOne(backend.NewJob{Queue: light})
		p.Weights = nil
		if jobs := f.claimWith(p); len(jobs) != 1 {
			t.Fatalf("weighted claim without weights returned %d jobs; want the one in %s", len(jobs), light)
		}
	})
}

// ids lists the ids of jobs, for failure messages.
func ids(jobs []*backend.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}
