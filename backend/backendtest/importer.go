package backendtest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// importable builds a job with a history in state st, in f.queue, as
// another store could hold it.
func (f *fixture) importable(st backend.State) *backend.Job {
	created := t0.Add(-time.Hour)
	j := &backend.Job{
		ID: f.unknownID(), Type: testType, Queue: f.queue, Payload: []byte(`{"n":1}`),
		Title: "moved " + string(st), Priority: 3, State: st, MaxAttempts: 5,
		RunAt: created, Timeout: time.Minute, Tags: []string{"a", "b"},
		Metadata: map[string]string{"k": "v"}, Retention: backend.RetainForever,
		CreatedAt: created, LeaseToken: 2, Attempt: 2, WorkerID: "w1",
		StartedAt: created.Add(2 * time.Minute),
		Errors: []backend.AttemptError{
			{Attempt: 1, At: created.Add(time.Minute), Kind: backend.AttemptFailed, Message: "boom", Stack: "at x"},
		},
		Progress: &backend.Progress{Percent: 40, Message: "half", At: created.Add(90 * time.Second)},
		Logs:     []backend.LogLine{{At: created.Add(61 * time.Second), Line: "one"}, {At: created.Add(62 * time.Second), Line: "two"}},
	}
	switch st {
	case backend.StateScheduled:
		j.RunAt = t0.Add(time.Hour)
		j.Attempt, j.LeaseToken, j.StartedAt, j.WorkerID, j.Errors, j.Progress, j.Logs = 0, 0, time.Time{}, "", nil, nil, nil
	case backend.StateRetry:
		j.RunAt = t0.Add(10 * time.Minute)
	case backend.StateCompleted:
		j.Result = []byte(`{"ok":true}`)
		j.FinishedAt = created.Add(3 * time.Minute)
		j.Retention = backend.RetainFor(2 * time.Hour)
		j.ExpiresAt = j.FinishedAt.Add(2 * time.Hour)
	case backend.StateFailed:
		j.FinishedAt = created.Add(3 * time.Minute)
		j.Errors = append(j.Errors, backend.AttemptError{Attempt: 2, At: j.FinishedAt, Kind: backend.AttemptFailed, Message: "again"})
	case backend.StateCancelled:
		j.FinishedAt = created.Add(3 * time.Minute)
		j.CancelReason = backend.CancelReasonRequested
		j.CancelRequested = true
		j.ExpiresAt = j.FinishedAt.Add(7 * 24 * time.Hour)
		j.Retention = backend.RetainDefault
	}
	return j
}

// importJobs imports jobs at f.now and fails the test on error.
func (f *fixture) importJobs(jobs ...*backend.Job) []backend.ImportItem {
	f.t.Helper()
	res, err := f.b.Import(f.ctx, backend.ImportParams{Jobs: jobs, Now: f.now})
	if err != nil {
		f.t.Fatalf("Import of %d jobs: %v", len(jobs), err)
	}
	if len(res.Items) != len(jobs) {
		f.t.Fatalf("Import of %d jobs returned %d items; want one per job", len(jobs), len(res.Items))
	}
	return res.Items
}

// sameAsImported fails the test when the stored job differs from what was
// imported, at the suite's millisecond precision (the coarsest a store
// keeps).
func (f *fixture) sameAsImported(want *backend.Job) {
	f.t.Helper()
	if d := backend.SameJobAt(want, f.get(want.ID), time.Millisecond); d != "" {
		f.t.Fatalf("imported job %s reads back with a different %s:\n\t%s", want.ID, d, strings.Join(diffJobs(want, f.get(want.ID)), "\n\t"))
	}
}

func testImport(t *testing.T, factory Factory) {
	if _, err := factory(t).Import(t.Context(), backend.ImportParams{Now: t0}); errors.Is(err, backend.ErrNotSupported) {
		t.Skip("the store does not offer Import")
	}
	t.Run("RoundTripAndRepeat", func(t *testing.T) {
		f := start(t, factory)
		var jobs []*backend.Job
		for _, st := range backend.States() {
			if st != backend.StateActive {
				jobs = append(jobs, f.importable(st))
			}
		}
		for i, it := range f.importJobs(jobs...) {
			if it.Outcome != backend.ImportCreated {
				t.Fatalf("first Import of %s job: %+v; want created", jobs[i].State, it)
			}
		}
		for _, j := range jobs {
			f.sameAsImported(j)
		}
		for i, it := range f.importJobs(jobs...) {
			if it.Outcome != backend.ImportSame {
				t.Fatalf("second Import of %s job: %+v; want same", jobs[i].State, it)
			}
		}
		st, err := f.b.Stats(f.ctx, backend.StatsParams{Now: f.now})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range st.Queues {
			if q.Name != f.queue {
				continue
			}
			for _, s := range backend.States() {
				want := int64(1)
				if s == backend.StateActive {
					want = 0
				}
				if q.Counts[s] != want {
					t.Fatalf("Stats count %s after import = %d; want %d", s, q.Counts[s], want)
				}
			}
		}
	})
	t.Run("ImportedJobsLive", func(t *testing.T) {
		f := start(t, factory)
		pending, sched, done := f.importable(backend.StatePending), f.importable(backend.StateScheduled), f.importable(backend.StateCompleted)
		f.importJobs(pending, sched, done)
		j := f.claimOne()
		if j.ID != pending.ID || j.Attempt != pending.Attempt+1 || j.LeaseToken <= pending.LeaseToken {
			t.Fatalf("claim after import = %s attempt %d token %d; want %s attempt %d token > %d",
				j.ID, j.Attempt, j.LeaseToken, pending.ID, pending.Attempt+1, pending.LeaseToken)
		}
		if err := f.complete(lease(j), []byte(`{"n":2}`)); err != nil {
			t.Fatalf("Complete of a claimed imported job: %v", err)
		}
		f.wantState(j.ID, backend.StateCompleted, "an imported job completes under its new lease")
		other := f.importable(backend.StateRetry)
		f.importJobs(other)
		if c, err := f.b.Cancel(f.ctx, backend.CancelParams{ID: other.ID, Now: f.now}); err != nil || c.State != backend.StateCancelled {
			t.Fatalf("Cancel of an imported retry job: %v", err)
		}
		page, err := f.b.List(f.ctx, backend.ListParams{Queue: f.queue, State: backend.StateCancelled})
		if err != nil || len(page.Jobs) != 1 || page.Jobs[0].ID != other.ID {
			t.Fatalf("List of the queue's cancelled jobs: %v; want the imported job %s", err, other.ID)
		}
		f.mustOK("Delete", f.b.Delete(f.ctx, backend.DeleteParams{ID: other.ID, Now: f.now}))
		f.wantGone(other.ID, "an imported job can be deleted")
		f.claimNothing("the imported scheduled job runs at t0+1h")
		f.at(time.Hour)
		f.claimID(sched.ID, "the imported scheduled job's run-at has come")
		f.at(2 * time.Hour)
		f.applyRetention()
		f.wantGone(done.ID, "the imported completed job's ExpiresAt has passed")
	})
	t.Run("Conflicts", func(t *testing.T) {
		f := start(t, factory)
		j := f.importable(backend.StateFailed)
		f.importJobs(j)
		other := j.Clone()
		other.Title = "another job"
		if it := f.importJobs(other)[0]; it.Outcome != backend.ImportConflict || !strings.Contains(it.Reason, j.ID) || !strings.Contains(it.Reason, "title") {
			t.Fatalf("Import of a different job under an existing id: %+v; want a conflict naming the id and title", it)
		}
		f.sameAsImported(j)

		holder := f.enqueueOne(backend.NewJob{UniqueKey: "k1"})
		dup := f.importable(backend.StatePending)
		dup.UniqueKey = "k1"
		final := f.importable(backend.StateCompleted)
		final.UniqueKey = "k1"
		fresh := f.importable(backend.StatePending)
		fresh.UniqueKey = "k2"
		items := f.importJobs(dup, final, fresh)
		if items[0].Outcome != backend.ImportConflict || items[0].HolderID != holder {
			t.Fatalf("Import of a pending job whose key %s holds: %+v; want a conflict naming holder %s", "k1", items[0], holder)
		}
		f.wantGone(dup.ID, "a conflict writes nothing")
		if items[1].Outcome != backend.ImportCreated || items[2].Outcome != backend.ImportCreated {
			t.Fatalf("Import of a final job with a held key and of a free key: %+v %+v; want created", items[1], items[2])
		}
		if r := f.enqueue(backend.NewJob{UniqueKey: "k2"})[0]; !r.Duplicate || r.ID != fresh.ID {
			t.Fatalf("Enqueue with the key of an imported pending job: %+v; want a duplicate of %s", r, fresh.ID)
		}
	})
	t.Run("Refused", func(t *testing.T) {
		f := start(t, factory)
		active := f.importable(backend.StatePending)
		active.State = backend.StateActive
		bad := f.importable(backend.StatePending)
		bad.ID = "not-an-id"
		ok := f.importable(backend.StatePending)
		for _, jobs := range [][]*backend.Job{{ok, active}, {ok, bad}, {ok, ok}} {
			_, err := f.b.Import(f.ctx, backend.ImportParams{Jobs: jobs, Now: f.now})
			var ve *backend.ValidationError
			if !errors.As(err, &ve) || ve.Index != 1 {
				t.Fatalf("Import of a bad second job: %v; want a *ValidationError on item 1", err)
			}
		}
		f.wantGone(ok.ID, "a refused batch writes nothing")
	})
}
