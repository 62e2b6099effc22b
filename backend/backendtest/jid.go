package backendtest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// getJID reads a job by its JID and fails the test on error.
func (f *fixture) getJID(jid string) *backend.Job {
	f.t.Helper()
	j, err := f.b.Get(f.ctx, backend.GetParams{JID: jid})
	if err != nil {
		f.t.Fatalf("Get(jid %q): %v", jid, err)
	}
	return j
}

// wantNoJID checks that no job is known by jid.
func (f *fixture) wantNoJID(jid, why string) {
	f.t.Helper()
	j, err := f.b.Get(f.ctx, backend.GetParams{JID: jid})
	if !errors.Is(err, backend.ErrNotFound) {
		id := ""
		if j != nil {
			id = j.ID
		}
		f.t.Fatalf("Get(jid %q) = (job %q, err %v); want ErrNotFound: %s", jid, id, err, why)
	}
}

func testJID(t *testing.T, factory Factory) {
	t.Run("KnownByIt", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{JID: "a1b2c3", Title: "with jid"})
		plain := f.enqueueOne(backend.NewJob{Title: "without"})
		if j := f.getJID("a1b2c3"); j.ID != id || j.JID != "a1b2c3" || j.Title != "with jid" {
			t.Fatalf("Get by jid = (id %s, jid %q, title %q); want %s with jid a1b2c3", j.ID, j.JID, j.Title, id)
		}
		if j := f.get(id); j.JID != "a1b2c3" {
			t.Fatalf("Get by id shows jid %q; want a1b2c3", j.JID)
		}
		if j := f.get(plain); j.JID != "" {
			t.Fatalf("a job enqueued without a jid shows jid %q", j.JID)
		}
		f.wantNoJID("nobody", "no job has that jid")
		f.wantNoJID(id, "a job's id is not its jid")
		j := f.claimID(id, "the first job")
		if j.JID != "a1b2c3" {
			t.Fatalf("claimed job carries jid %q; want a1b2c3", j.JID)
		}
		if _, err := f.b.Get(f.ctx, backend.GetParams{ID: id, JID: "a1b2c3"}); !errors.As(err, new(*backend.ValidationError)) {
			t.Fatalf("Get with both id and jid: err %v; want a *ValidationError", err)
		}
	})

	t.Run("UniqueAcrossQueues", func(t *testing.T) {
		f := start(t, factory)
		first := f.enqueueOne(backend.NewJob{JID: "j"})
		r := f.enqueue(backend.NewJob{JID: "j", Queue: uniqueQueue(t, "-other"), Type: "another.type"})[0]
		if !r.Duplicate || r.ID != first || r.State != backend.StatePending {
			t.Fatalf("second job with a held jid in another queue = %+v; want Duplicate of %s (pending)", r, first)
		}
		res := f.enqueue(
			backend.NewJob{JID: "k", Title: "first"},
			backend.NewJob{JID: "k", Title: "second"},
			backend.NewJob{JID: "other"},
		)
		if res[0].Duplicate || res[2].Duplicate || !res[1].Duplicate || res[1].ID != res[0].ID {
			t.Fatalf("batch with a jid twice = %+v; want the second item a Duplicate of the first", res)
		}
		if got := f.getJID("k"); got.Title != "first" {
			t.Fatalf("jid k names the job titled %q; want the first", got.Title)
		}
		r = f.enqueue(backend.NewJob{JID: "u", UniqueKey: "key"}, backend.NewJob{JID: "u2", UniqueKey: "key"})[1]
		if !r.Duplicate {
			t.Fatalf("a fresh jid with a held unique key = %+v; want a Duplicate (the key still holds)", r)
		}
		f.wantNoJID("u2", "the duplicate wrote nothing")
	})

	t.Run("HeldUntilDeleted", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{JID: "j", Retention: backend.RetainFor(time.Hour)})
		j := f.claimID(id, "the only job")
		f.mustOK("Complete", f.complete(lease(j), nil))
		r := f.enqueue(backend.NewJob{JID: "j"})[0]
		if !r.Duplicate || r.ID != id || r.State != backend.StateCompleted {
			t.Fatalf("jid of a completed job = %+v; want Duplicate of %s (completed): a jid holds while its job exists", r, id)
		}
		f.now = f.now.Add(time.Hour)
		f.applyRetention()
		f.wantGone(id, "retention ran out")
		f.wantNoJID("j", "retention deleted the job")
		second := f.wantFresh(backend.NewJob{JID: "j"}, "retention freed the jid")
		if got := f.getJID("j"); got.ID != second {
			t.Fatalf("jid j names %s; want the new job %s", got.ID, second)
		}
		f.mustOK("Delete", f.b.Delete(f.ctx, backend.DeleteParams{ID: second, Now: f.now}))
		f.wantNoJID("j", "the job was deleted")
		f.wantFresh(backend.NewJob{JID: "j"}, "Delete freed the jid")
	})

	t.Run("Concurrent", func(t *testing.T) {
		f := start(t, factory)
		const producers = 8
		results := make([]backend.EnqueuedJob, producers)
		errs := make([]error, producers)
		var wg sync.WaitGroup
		for i := range producers {
			wg.Go(func() {
				res, err := f.b.Enqueue(f.ctx, backend.EnqueueParams{Now: f.now, Jobs: []backend.NewJob{
					f.fill(backend.NewJob{JID: "race", Queue: uniqueQueue(t, string(rune('a'+i)))}),
				}})
				if err == nil {
					results[i] = res.Jobs[0]
				}
				errs[i] = err
			})
		}
		wg.Wait()
		winners := map[string]bool{}
		for i, r := range results {
			if errs[i] != nil {
				t.Fatalf("producer %d: Enqueue: %v", i, errs[i])
			}
			if !r.Duplicate {
				winners[r.ID] = true
			}
		}
		if len(winners) != 1 {
			t.Fatalf("%d concurrent enqueues of one jid into different queues wrote %d jobs; want exactly 1", producers, len(winners))
		}
		for i, r := range results {
			if !winners[r.ID] {
				t.Errorf("producer %d was told the jid is held by %s; want the one job written", i, r.ID)
			}
		}
	})

	t.Run("Validation", func(t *testing.T) {
		f := start(t, factory)
		for _, jid := range []string{string(make([]byte, backend.MaxJID+1)), "bad\x00jid", "\xff"} {
			_, err := f.b.Enqueue(f.ctx, backend.EnqueueParams{Now: f.now, Jobs: []backend.NewJob{f.fill(backend.NewJob{JID: jid})}})
			var ve *backend.ValidationError
			if !errors.As(err, &ve) || ve.Field != "jid" {
				t.Errorf("Enqueue with jid %q: err %v; want a *ValidationError on jid", jid, err)
			}
		}
		f.claimNothing("no invalid job was written")
	})

	t.Run("Import", func(t *testing.T) {
		f := start(t, factory)
		if _, err := f.b.Import(f.ctx, backend.ImportParams{Now: f.now}); errors.Is(err, backend.ErrNotSupported) {
			t.Skip("the store does not offer Import")
		}
		held := f.enqueueOne(backend.NewJob{JID: "held"})
		a := f.importable(backend.StatePending)
		a.JID = "moved"
		b := f.importable(backend.StateFailed)
		b.JID = "held"
		items := f.importJobs(a, b)
		if items[0].Outcome != backend.ImportCreated {
			t.Fatalf("Import of a job with a free jid: %+v; want created", items[0])
		}
		if items[1].Outcome != backend.ImportConflict || items[1].HolderID != held {
			t.Fatalf("Import of a job whose jid is held: %+v; want a conflict naming %s", items[1], held)
		}
		if got := f.getJID("moved"); got.ID != a.ID {
			t.Fatalf("jid of the imported job names %s; want %s", got.ID, a.ID)
		}
		f.wantGone(b.ID, "the conflicting job was not written")
		if items = f.importJobs(a); items[0].Outcome != backend.ImportSame {
			t.Fatalf("second Import of the job with a jid: %+v; want same", items[0])
		}
		c := a.Clone()
		c.JID = "changed"
		if items = f.importJobs(c); items[0].Outcome != backend.ImportConflict {
			t.Fatalf("Import of the same id with another jid: %+v; want a conflict", items[0])
		}
	})
}
