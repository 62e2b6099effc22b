package backendtest

import (
	"bytes"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

func testComplete(t *testing.T, factory Factory) {
	t.Run("Result", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{})
		started := f.now
		j := f.claimOne()
		f.advance(3 * time.Second)
		result := []byte(`{"sent":true,"bytes":"\u0000\u00ff"}`)
		f.mustOK("Complete", f.complete(lease(j), bytes.Clone(result)))
		got := f.wantState(id, backend.StateCompleted, "Complete finishes the job")
		if !bytes.Equal(got.Result, result) {
			t.Errorf("Result = %q; want %q", got.Result, result)
		}
		if got.Attempt != 1 || len(got.Errors) != 0 {
			t.Errorf("Attempt, Errors = %d, %+v; want 1 and none", got.Attempt, got.Errors)
		}
		f.wantTime("StartedAt", got.StartedAt, started)
		f.wantTime("FinishedAt", got.FinishedAt, f.now)
		f.claimNothing("a completed job never runs again")
	})

	t.Run("NilResult", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		f.mustOK("Complete", f.complete(lease(j), nil))
		if got := f.get(id); len(got.Result) != 0 {
			t.Fatalf("Result after Complete with nil = %q; want empty", got.Result)
		}
	})

	t.Run("BinaryResult", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		result := make([]byte, 256)
		for i := range result {
			result[i] = byte(i)
		}
		buf := bytes.Clone(result)
		f.mustOK("Complete", f.complete(lease(j), buf))
		clear(buf) // the store must have copied it
		if got := f.get(id); !bytes.Equal(got.Result, result) {
			t.Fatalf("all 256 byte values as a result came back as %q", got.Result)
		}
	})
}

func testDelete(t *testing.T, factory Factory) {
	del := func(f *fixture, id string) error {
		return f.b.Delete(f.ctx, backend.DeleteParams{ID: id, Now: f.now})
	}
	t.Run("Waiting", func(t *testing.T) {
		f := start(t, factory)
		pending := f.enqueueOne(backend.NewJob{})
		scheduled := f.enqueueOne(backend.NewJob{RunAt: f.now.Add(time.Hour)})
		for _, id := range []string{pending, scheduled} {
			f.mustOK("Delete", del(f, id))
			f.wantGone(id, "it was deleted")
		}
		f.mustErr("second Delete", del(f, pending), backend.ErrNotFound, "it was deleted already")
		f.now = f.now.Add(time.Hour)
		f.promote()
		f.claimNothing("deleted jobs never run")
	})

	t.Run("Final", func(t *testing.T) {
		f := start(t, factory)
		for _, s := range []backend.State{backend.StateCompleted, backend.StateFailed, backend.StateCancelled} {
			id := f.finish(backend.RetainForever, s)
			f.mustOK("Delete of a "+string(s)+" job", del(f, id))
			f.wantGone(id, "it was deleted")
		}
	})

	t.Run("Active", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		before := f.get(j.ID)
		f.mustErr("Delete of an active job", del(f, j.ID), backend.ErrJobActive, "an active job cannot be deleted")
		f.unchanged(before, "Delete was refused")
		f.mustOK("Complete after a refused Delete", f.complete(lease(j), nil))
	})
}
