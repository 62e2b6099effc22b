package backendtest

import (
	"bytes"
	"slices"
	"testing"

	"github.com/kyuhq/kyu/backend"
)

// testClaimBudget checks ClaimParams.MaxBytes: a claim takes jobs in claim
// order while their payloads fit, always the first, stops at the first job
// that does not fit (also across queues) and leaves it, and every job
// after it, untouched.
func testClaimBudget(t *testing.T, factory Factory) {
	t.Run("StopsBeforeTheJobThatDoesNotFit", func(t *testing.T) {
		f := start(t, factory)
		ids := f.enqueueSized(f.queue, 100, 200, 300, 400, 50)
		p := f.claimParams(10)
		p.MaxBytes = 600
		f.wantBudgetClaim(p, ids[:3], true, "100+200+300 bytes fill a 600-byte budget; the claim stops before the 400-byte job and leaves the 50-byte one after it")
		f.wantUntouched(ids[3:], "the claim stopped before them")
		f.wantBudgetClaim(p, ids[3:], false, "the next claim takes the jobs left behind, in order")
	})

	t.Run("FirstJobAlwaysTaken", func(t *testing.T) {
		f := start(t, factory)
		ids := f.enqueueSized(f.queue, 1000, 10)
		p := f.claimParams(10)
		p.MaxBytes = 100
		f.wantBudgetClaim(p, ids[:1], true, "the first job of a claim is taken whatever its size")
		f.wantUntouched(ids[1:], "the claim stopped after its first job, which was over the budget")
		f.wantBudgetClaim(p, ids[1:], false, "the job left behind is claimed next")
	})

	t.Run("NoBound", func(t *testing.T) {
		f := start(t, factory)
		ids := f.enqueueSized(f.queue, 1000, 1000, 0)
		f.wantBudgetClaim(f.claimParams(10), ids, false, "MaxBytes 0 bounds nothing")
	})

	t.Run("StopsForMaxNotBudget", func(t *testing.T) {
		f := start(t, factory)
		ids := f.enqueueSized(f.queue, 10, 10, 10)
		p := f.claimParams(2)
		p.MaxBytes = 1000
		f.wantBudgetClaim(p, ids[:2], false, "Max stops the claim, not the budget")
	})

	t.Run("StrictSpansQueues", func(t *testing.T) {
		f := start(t, factory)
		qa, qb := uniqueQueue(t, "-a"), uniqueQueue(t, "-b")
		a := f.enqueueSized(qa, 300, 300)
		b := f.enqueueSized(qb, 100, 100)
		p := f.claimParams(10)
		p.Queues, p.Mode, p.MaxBytes = []string{qa, qb}, backend.ClaimStrict, 700
		f.wantBudgetClaim(p, append(slices.Clone(a), b[0]), true, "both of the first queue's jobs, then the second queue's first; the budget spans the claim")
		f.wantUntouched(b[1:], "the claim stopped before it")
		f.wantBudgetClaim(p, b[1:], false, "the job left behind is claimed next")
	})

	t.Run("LaterQueueFirstJobNotFree", func(t *testing.T) {
		f := start(t, factory)
		qa, qb := uniqueQueue(t, "-a"), uniqueQueue(t, "-b")
		a := f.enqueueSized(qa, 600)
		b := f.enqueueSized(qb, 200)
		p := f.claimParams(10)
		p.Queues, p.Mode, p.MaxBytes = []string{qa, qb}, backend.ClaimStrict, 700
		f.wantBudgetClaim(p, a, true, "only the first job of the whole claim is taken over the budget, not the first of each queue")
		f.wantUntouched(b, "the claim stopped before it")
		f.wantBudgetClaim(p, b, false, "the job left behind is claimed next")
	})

	t.Run("WeightedSpansQueues", func(t *testing.T) {
		f := start(t, factory)
		qa, qb := uniqueQueue(t, "-a"), uniqueQueue(t, "-b")
		all := append(f.enqueueSized(qa, 100, 100, 100), f.enqueueSized(qb, 100, 100, 100)...)
		p := f.claimParams(10)
		p.Queues, p.Mode, p.MaxBytes = []string{qa, qb}, backend.ClaimWeighted, 250
		res, err := f.b.Claim(f.ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Jobs) != 2 || !res.Truncated {
			t.Fatalf("weighted Claim(MaxBytes 250) over 100-byte jobs of two queues took %d jobs, Truncated %v; want 2 jobs and Truncated: the budget spans the whole claim", len(res.Jobs), res.Truncated)
		}
		var left []string
		for _, id := range all {
			if !slices.Contains(ids(res.Jobs), id) {
				left = append(left, id)
			}
		}
		f.wantUntouched(left, "the weighted claim stopped before them")
	})
}

// enqueueSized writes one job per size into queue, each with a payload of
// that many bytes, and returns their ids in enqueue (claim) order.
func (f *fixture) enqueueSized(queue string, sizes ...int) []string {
	f.t.Helper()
	out := make([]string, len(sizes))
	for i, n := range sizes {
		out[i] = f.enqueueOne(backend.NewJob{Queue: queue, Payload: bytes.Repeat([]byte{'x'}, n)})
	}
	return out
}

// wantBudgetClaim claims with p and wants exactly the jobs want, and
// Truncated as given.
func (f *fixture) wantBudgetClaim(p backend.ClaimParams, want []string, truncated bool, why string) {
	f.t.Helper()
	p.Now = f.now
	res, err := f.b.Claim(f.ctx, p)
	if err != nil {
		f.t.Fatalf("Claim(max %d, MaxBytes %d): %v", p.Max, p.MaxBytes, err)
	}
	got := ids(res.Jobs)
	slices.Sort(got)
	sorted := slices.Sorted(slices.Values(want))
	if !slices.Equal(got, sorted) || res.Truncated != truncated {
		f.t.Fatalf("Claim(max %d, MaxBytes %d) took %v, Truncated %v; want %v, Truncated %v: %s", p.Max, p.MaxBytes, got, res.Truncated, sorted, truncated, why)
	}
	for _, j := range res.Jobs {
		if j.State != backend.StateActive || j.Attempt != 1 {
			f.t.Fatalf("claimed job %s: state %q, attempt %d; want active, 1", j.ID, j.State, j.Attempt)
		}
	}
}

// wantUntouched wants the jobs pending and never claimed.
func (f *fixture) wantUntouched(jobs []string, why string) {
	f.t.Helper()
	for _, id := range jobs {
		j := f.get(id)
		if j.State != backend.StatePending || j.Attempt != 0 || j.LeaseToken != 0 {
			f.t.Fatalf("job %s: state %q, attempt %d, lease token %d; want pending, 0, 0 (untouched): %s", id, j.State, j.Attempt, j.LeaseToken, why)
		}
	}
}
