package backendtest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

func testClaim(t *testing.T, factory Factory) {
	t.Run("Fields", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{})
		f.advance(time.Second)
		j := f.claimID(id, "the only job")
		check := func(from string, j *backend.Job) {
			t.Helper()
			if j.State != backend.StateActive || j.Attempt != 1 || j.LeaseToken != 1 || j.WorkerID != workerID {
				t.Fatalf("%s: State, Attempt, LeaseToken, WorkerID = %q, %d, %d, %q; want active, 1, 1 (the first claim gives token 1), %q",
					from, j.State, j.Attempt, j.LeaseToken, j.WorkerID, workerID)
			}
			f.wantTime(from+": StartedAt", j.StartedAt, f.now)
			f.wantTime(from+": LeaseExpiresAt", j.LeaseExpiresAt, f.now.Add(testLease))
		}
		check("claimed job", j)
		check("Get after claim", f.get(id))
	})

	t.Run("Empty", func(t *testing.T) {
		f := start(t, factory)
		f.claimNothing("nothing was enqueued")
	})

	t.Run("Max", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueN(5)
		if got := f.claim(3); len(got) != 3 {
			t.Fatalf("Claim(max 3) with 5 pending returned %d jobs; want 3", len(got))
		}
		if got := f.claim(10); len(got) != 2 {
			t.Fatalf("Claim(max 10) with 2 pending returned %d jobs; want 2", len(got))
		}
		f.claimNothing("all five are active")
	})

	t.Run("NotBeforeRunAt", func(t *testing.T) {
		f := start(t, factory)
		runAt := f.now.Add(time.Minute)
		id := f.enqueueOne(backend.NewJob{RunAt: runAt})
		f.claimNothing("the job is scheduled a minute ahead")
		f.now = runAt.Add(-time.Millisecond)
		f.promote()
		f.claimNothing("1ms before RunAt the job is not claimable, even after Promote")
		f.wantState(id, backend.StateScheduled, "RunAt has not come")
		f.now = runAt
		f.promote()
		f.claimID(id, "a job is claimable exactly at RunAt")
	})

	t.Run("DueWithoutPromote", func(t *testing.T) {
		f := start(t, factory)
		runAt := f.now.Add(time.Minute)
		scheduled := f.enqueueOne(backend.NewJob{RunAt: runAt})
		retried := f.enqueueOne(backend.NewJob{})
		j := f.claimID(retried, "the pending job")
		f.mustOK("Fail with a retry at RunAt", f.fail(backend.FailItem{Lease: backend.Lease{JobID: j.ID, Token: j.LeaseToken}, Message: "boom", RetryAt: runAt}))
		f.claimNothing("both jobs wait for RunAt")
		f.now = runAt
		got := f.claim(10)
		if len(got) != 2 {
			t.Fatalf("Claim at RunAt without Promote returned %d jobs; want the scheduled and the retry job", len(got))
		}
		for _, g := range got {
			if g.ID != scheduled && g.ID != retried {
				t.Fatalf("Claim returned unknown job %s", g.ID)
			}
		}
	})

	t.Run("ClaimerClockBehind", func(t *testing.T) {
		f := start(t, factory)
		// The producer's clock is a second ahead of the claimer's.
		f.now = t0.Add(time.Second)
		id := f.enqueueOne(backend.NewJob{})
		f.wantState(id, backend.StatePending, "enqueued to run at once")
		f.now = t0
		f.claimID(id, "a pending job is claimable whatever the claimer's clock says")
	})

	t.Run("Exclusive", func(t *testing.T) {
		f := start(t, factory)
		const jobs, workers = 200, 8
		batch := make([]backend.NewJob, jobs)
		for i := range batch {
			batch[i].Title = fmt.Sprint(i)
		}
		enqueued := map[string]bool{}
		for _, r := range f.enqueue(batch...) {
			enqueued[r.ID] = true
		}

		var (
			mu      sync.Mutex
			claimed = map[string]int{}
			total   int
			wg      sync.WaitGroup
		)
		for w := range workers {
			wg.Go(func() {
				p := f.claimParams(w%5 + 1)
				p.WorkerID = fmt.Sprintf("worker-%d", w)
				for empty := 0; empty < 50; {
					mu.Lock()
					done := total == jobs
					mu.Unlock()
					if done {
						return
					}
					res, err := f.b.Claim(f.ctx, p)
					if err != nil {
						t.Errorf("worker %d: Claim: %v", w, err)
						return
					}
					if len(res.Jobs) > p.Max {
						t.Errorf("worker %d: Claim(max %d) returned %d jobs", w, p.Max, len(res.Jobs))
					}
					if len(res.Jobs) == 0 {
						empty++
						continue
					}
					mu.Lock()
					for _, j := range res.Jobs {
						claimed[j.ID]++
						total++
						if j.LeaseToken != 1 || j.Attempt != 1 || j.WorkerID != p.WorkerID {
							t.Errorf("job %s claimed with token %d, attempt %d, worker %q; want 1, 1, %q", j.ID, j.LeaseToken, j.Attempt, j.WorkerID, p.WorkerID)
						}
					}
					mu.Unlock()
					// Every claim holds its own live lease: completing all of
					// them, concurrently with other claims, must succeed.
					items := make([]backend.CompleteItem, len(res.Jobs))
					for i, j := range res.Jobs {
						items[i] = backend.CompleteItem{Lease: lease(j)}
					}
					cres, err := f.b.Complete(f.ctx, backend.CompleteParams{Items: items, Now: p.Now})
					if err != nil || len(cres.Errors) != len(items) {
						t.Errorf("worker %d: Complete of %d claimed jobs = %v, %d item errors", w, len(items), err, len(cres.Errors))
						return
					}
					for i, err := range cres.Errors {
						if err != nil {
							t.Errorf("worker %d: Complete of freshly claimed %s: %v", w, items[i].Lease.JobID, err)
						}
					}
				}
			})
		}
		wg.Wait()
		for id, n := range claimed {
			if n > 1 {
				t.Errorf("job %s was claimed %d times by concurrent claims; want exactly once", id, n)
			}
			if !enqueued[id] {
				t.Errorf("claim returned %s, which was never enqueued", id)
			}
		}
		if len(claimed) != jobs {
			t.Errorf("concurrent claims took %d distinct jobs of %d; want all", len(claimed), jobs)
		}
		f.claimNothing("every job was claimed and completed")
		for id := range enqueued {
			f.wantState(id, backend.StateCompleted, "its one claim completed it")
		}
	})
}
