package backendtest

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/kyuhq/kyu/backend"
)

// testClaimTypes checks ClaimParams.Types: a claim takes only jobs of the
// listed types, in claim order, and leaves the others untouched in their
// place, also with Max, a byte budget and several queues.
func testClaimTypes(t *testing.T, factory Factory) {
	t.Run("OnlyListedTypesInOrder", func(t *testing.T) {
		f := start(t, factory)
		ids := f.enqueueTyped(f.queue, "a", "x", "b", "x", "a")
		hi := f.enqueueOne(backend.NewJob{Type: "b", Priority: 5})
		p := f.claimParams(10)
		p.Types = []string{"a", "b"}
		f.wantTypedClaim(p, []string{hi, ids[0], ids[2], ids[4]}, false, "only types a and b, by priority, then enqueue order")
		f.wantUntouched([]string{ids[1], ids[3]}, "their type was not asked for")
		f.wantTypedClaim(f.claimParams(10), []string{ids[1], ids[3]}, false, "a claim without types takes the skipped jobs, in order")
	})

	t.Run("SkippedKeepTheirPlace", func(t *testing.T) {
		f := start(t, factory)
		ids := f.enqueueTyped(f.queue, "x", "a", "y", "a", "x")
		p := f.claimParams(10)
		p.Types = []string{"a"}
		f.wantTypedClaim(p, []string{ids[1], ids[3]}, false, "the jobs of type a, past the others")
		f.wantUntouched([]string{ids[0], ids[2], ids[4]}, "skipped by the filter")
		f.wantTypedClaim(f.claimParams(2), []string{ids[0], ids[2]}, false, "the skipped jobs still come first, in enqueue order")
		f.wantTypedClaim(f.claimParams(2), ids[4:], false, "and then the last")
	})

	t.Run("MaxBelowMatches", func(t *testing.T) {
		f := start(t, factory)
		ids := f.enqueueTyped(f.queue, "a", "b", "a", "b", "a")
		p := f.claimParams(2)
		p.Types = []string{"a"}
		f.wantTypedClaim(p, []string{ids[0], ids[2]}, false, "the first two jobs of type a")
		f.wantUntouched([]string{ids[1], ids[3], ids[4]}, "past Max or of another type")
		f.wantTypedClaim(p, ids[4:], false, "the last job of type a next")
		f.wantUntouched([]string{ids[1], ids[3]}, "of another type")
	})

	t.Run("StrictAcrossQueues", func(t *testing.T) {
		f := start(t, factory)
		qa, qb := uniqueQueue(t, "-a"), uniqueQueue(t, "-b")
		a := f.enqueueTyped(qa, "x", "a", "x")
		b := f.enqueueTyped(qb, "a", "x", "a")
		p := f.claimParams(1)
		p.Queues, p.Mode, p.Types = []string{qa, qb}, backend.ClaimStrict, []string{"a"}
		f.wantTypedClaim(p, a[1:2], false, "the first queue's job of type a, behind one of another type, comes before the second queue's")
		p.Max = 10
		f.wantTypedClaim(p, []string{b[0], b[2]}, false, "then the second queue's jobs of type a")
		f.wantUntouched([]string{a[0], a[2], b[1]}, "of another type")
	})

	t.Run("Weighted", func(t *testing.T) {
		f := start(t, factory)
		qa, qb := uniqueQueue(t, "-a"), uniqueQueue(t, "-b")
		a := f.enqueueTyped(qa, "x", "a")
		b := f.enqueueTyped(qb, "a", "x")
		p := f.claimParams(10)
		p.Queues, p.Mode, p.Types = []string{qa, qb}, backend.ClaimWeighted, []string{"a"}
		f.wantTypedClaim(p, []string{a[1], b[0]}, false, "the jobs of type a of both queues")
		f.wantUntouched([]string{a[0], b[1]}, "of another type")
	})

	t.Run("WithBudget", func(t *testing.T) {
		f := start(t, factory)
		var ids []string
		for _, j := range []struct {
			typ  string
			size int
		}{{"a", 100}, {"x", 10}, {"a", 300}, {"a", 50}} {
			ids = append(ids, f.enqueueOne(backend.NewJob{Type: j.typ, Payload: bytes.Repeat([]byte{'x'}, j.size)}))
		}
		p := f.claimParams(10)
		p.Types, p.MaxBytes = []string{"a"}, 350
		f.wantTypedClaim(p, ids[:1], true, "100+300 bytes of type a are over 350; the 10-byte job of another type neither counts nor is taken")
		f.wantUntouched(ids[1:], "the claim stopped before them, or skipped them")
		p.MaxBytes = 0
		f.wantTypedClaim(p, []string{ids[2], ids[3]}, false, "the jobs of type a left behind, in order")
		f.wantUntouched(ids[1:2], "of another type")
	})

	t.Run("FindsPastScanBound", func(t *testing.T) {
		f := start(t, factory)
		others := make([]backend.NewJob, backend.ClaimTypeScan)
		for i := range others {
			others[i] = backend.NewJob{Type: "x"}
		}
		for i := 0; i < len(others); i += 500 {
			f.enqueue(others[i:min(i+500, len(others))]...)
		}
		want := f.enqueueOne(backend.NewJob{Type: "a"})
		p := f.claimParams(10)
		p.Types = []string{"a"}
		f.wantTypedClaim(p, []string{want}, false, "a matching job with ClaimTypeScan jobs of other types ahead must be found")
	})

	t.Run("Check", func(t *testing.T) {
		f := start(t, factory)
		for _, types := range [][]string{{""}, {"a", "bad\x00"}, {string(bytes.Repeat([]byte{'t'}, backend.MaxType+1))}, make([]string, backend.MaxClaimTypes+1)} {
			p := f.claimParams(1)
			p.Types = types
			var verr *backend.ValidationError
			if _, err := f.b.Claim(f.ctx, p); !errors.As(err, &verr) {
				f.t.Fatalf("Claim(types %.40q) = %v; want a validation error", types, err)
			}
		}
	})
}

// enqueueTyped writes one job per type into queue and returns their ids
// in enqueue (claim) order.
func (f *fixture) enqueueTyped(queue string, types ...string) []string {
	f.t.Helper()
	out := make([]string, len(types))
	for i, typ := range types {
		out[i] = f.enqueueOne(backend.NewJob{Queue: queue, Type: typ})
	}
	return out
}

// wantTypedClaim claims with p and wants exactly the jobs want, in that
// order, and Truncated as given.
func (f *fixture) wantTypedClaim(p backend.ClaimParams, want []string, truncated bool, why string) {
	f.t.Helper()
	p.Now = f.now
	res, err := f.b.Claim(f.ctx, p)
	if err != nil {
		f.t.Fatalf("Claim(types %v, max %d): %v", p.Types, p.Max, err)
	}
	got := ids(res.Jobs)
	if p.Mode == backend.ClaimWeighted { // the queue order is random
		slices.Sort(got)
		want = slices.Sorted(slices.Values(want))
	}
	if !slices.Equal(got, want) || res.Truncated != truncated {
		f.t.Fatalf("Claim(types %v, max %d, MaxBytes %d) took %v, Truncated %v; want %v, Truncated %v: %s", p.Types, p.Max, p.MaxBytes, got, res.Truncated, want, truncated, why)
	}
	for _, j := range res.Jobs {
		if j.State != backend.StateActive || j.Attempt != 1 {
			f.t.Fatalf("claimed job %s: state %q, attempt %d; want active, 1", j.ID, j.State, j.Attempt)
		}
		if len(p.Types) > 0 && !slices.Contains(p.Types, j.Type) {
			f.t.Fatalf("claimed job %s of type %q; want one of %v", j.ID, j.Type, p.Types)
		}
	}
}
