package memory

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// indexed reports whether j has a current entry in its queue's index.
func (s *store) indexed(j *backend.Job) bool {
	qi := s.queueIndexes[j.Queue]
	if qi == nil {
		return false
	}
	h := qi.due
	if j.State == backend.StatePending {
		h = qi.ready[j.Type]
	}
	return h != nil && slices.ContainsFunc(h.list, func(e entry) bool { return e.job == j && s.current(h, e) })
}

// TestIndexFollowsJobs drives random moves through the store and checks
// after each that every waiting job is indexed, that the heaps stay
// bounded, and that Claim hands out the job a full scan would pick.
func TestIndexFollowsJobs(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	c := backend.Checked(s)
	r := rand.New(rand.NewPCG(1, 2))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ids []string
	var leases []backend.Lease
	for range 5000 {
		now = now.Add(time.Duration(r.IntN(3)) * time.Second)
		switch op := r.IntN(8); {
		case op < 3:
			nj := backend.NewJob{Type: []string{"a", "b"}[r.IntN(2)], Queue: "q", Priority: r.IntN(3), MaxAttempts: 3}
			if r.IntN(3) == 0 {
				nj.RunAt = now.Add(time.Duration(r.IntN(5)) * time.Second)
			}
			if r.IntN(5) == 0 {
				nj.Deadline = now.Add(5 * time.Second).Add(time.Duration(1+r.IntN(5)) * time.Second)
			}
			res, err := c.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{nj}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.Jobs[0].ID)
		case op == 3 && len(ids) > 0:
			id := ids[r.IntN(len(ids))]
			_, _ = c.Cancel(ctx, backend.CancelParams{Now: now, ID: id})
			_, _ = c.Retry(ctx, backend.RetryParams{Now: now, ID: id})
		case op == 4 && len(ids) > 0:
			_ = c.Delete(ctx, backend.DeleteParams{Now: now, ID: ids[r.IntN(len(ids))]})
		case op == 5 && len(leases) > 0:
			l := leases[r.IntN(len(leases))]
			if r.IntN(2) == 0 {
				_, _ = c.Release(ctx, backend.ReleaseParams{Now: now, Leases: []backend.Lease{l}})
			} else {
				_, _ = c.Fail(ctx, backend.FailParams{Now: now, Items: []backend.FailItem{{Lease: l, RetryAt: now.Add(time.Second)}}})
			}
		default:
			p := backend.ClaimParams{Now: now, Queues: []string{"q"}, Max: 1 + r.IntN(3), Lease: time.Minute}
			if r.IntN(2) == 0 {
				p.Types = []string{"a"}
			}
			// What a full scan would claim first, once due jobs are
			// promoted and jobs past their deadline cancelled.
			s.promoteDue("q", now)
			var want *backend.Job
			for _, j := range s.jobs {
				claimable := j.State == backend.StatePending && (p.Types == nil || j.Type == "a")
				if claimable && (j.Deadline.IsZero() || now.Before(j.Deadline)) {
					if want == nil || before(j, want) < 0 {
						want = j
					}
				}
			}
			res, err := c.Claim(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if want == nil && len(res.Jobs) > 0 || want != nil && (len(res.Jobs) == 0 || !slices.ContainsFunc(res.Jobs, func(j *backend.Job) bool { return j.ID == want.ID })) {
				t.Fatalf("Claim returned %d jobs without %v, the first by a full scan", len(res.Jobs), want)
			}
			for _, j := range res.Jobs {
				leases = append(leases, backend.Lease{JobID: j.ID, Token: j.LeaseToken})
			}
		}
		waiting := 0
		for _, j := range s.jobs {
			switch j.State {
			case backend.StatePending, backend.StateScheduled, backend.StateRetry:
				waiting++
				if !s.indexed(j) {
					t.Fatalf("%s job %s is not indexed", j.State, j.ID)
				}
			}
		}
		qi := s.queueIndexes["q"]
		if qi == nil {
			continue
		}
		entries := qi.due.Len()
		for _, h := range qi.ready {
			entries += h.Len()
		}
		if entries > 2*waiting+3*64 {
			t.Fatalf("%d entries for %d waiting jobs", entries, waiting)
		}
	}
}

// TestIndexDropsStaleEntries checks that jobs leaving a queue nobody
// claims from do not pile up in its index.
func TestIndexDropsStaleEntries(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	c := backend.Checked(s)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 1000 {
		res, err := c.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "t", Queue: "z"}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, backend.DeleteParams{Now: now, ID: res.Jobs[0].ID}); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.queueIndexes["z"].ready["t"].Len(); n > 64 {
		t.Fatalf("%d entries left for no waiting job", n)
	}
}
