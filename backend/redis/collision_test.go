package redis

import (
	"slices"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestIDCollision: the enqueue script tells an id that already holds
// another job (a collision) from one holding this very job (an earlier
// try of the same call), and writes nothing for a collision.
func TestIDCollision(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "first", Queue: "q"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Jobs[0].ID
	num, _ := queueNumOf(id)
	p := backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "second", Queue: "q"}}}
	if err := p.Prepare(); err != nil {
		t.Fatal(err)
	}
	g := &enqueueGroup{name: "q", num: num, pos: []int{0}}
	if err := s.buildEnqueue(ctx, g, &p); err != nil {
		t.Fatal(err)
	}
	g.setHead(s.keys, now) // the group is lean; this runs the enqueue script
	second := g.args[enqueueHead]
	g.args[enqueueHead] = id // collide with the first job
	g.args[enqueueHead+6] = encodeRecord(p.Jobs[0].Record(id, now))
	outcome := func() int64 {
		t.Helper()
		reply := s.eval(ctx, s.scripts.enqueue, s.keysOf(s.scripts.enqueue, num), g.args)
		v, asked, err := g.replyItems(reply)
		if err != nil {
			t.Fatalf("enqueue script: %v", err)
		}
		if asked {
			return 0
		}
		code, err := v[0].AsInt64()
		if err != nil {
			t.Fatalf("enqueue script: outcome %s, want a number", v[0].String())
		}
		return code
	}
	if code := outcome(); code != 2 {
		t.Fatalf("enqueue over another job's id: outcome %d, want 2 (collision)", code)
	}
	if j, err := s.Get(ctx, backend.GetParams{ID: id}); err != nil || j.Type != "first" {
		t.Fatalf("Get(%s) after the collision = %v, %v; want the first job unchanged", id, j, err)
	}
	// The same call tried again with its own id: written once, reported written.
	if err := g.setJob(0, &p); err != nil {
		t.Fatal(err)
	}
	if g.args[enqueueHead] == second {
		t.Fatal("setJob kept the old id")
	}
	for range 2 {
		if code := outcome(); code != 0 {
			t.Fatalf("enqueue with a fresh id: outcome %d, want 0", code)
		}
	}
	got, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute, Now: now})
	if err != nil || len(got.Jobs) != 2 {
		t.Fatalf("Claim = %d jobs, %v; want the first job and the second once", len(got.Jobs), err)
	}
	// Tried again after a worker claimed the job (its reply was lost, and
	// the job moved on meanwhile): still the same job, not a collision,
	// and not written again.
	if code := outcome(); code != 0 {
		t.Fatalf("enqueue again after the job was claimed: outcome %d, want 0 (the same job)", code)
	}
	if j, err := s.Get(ctx, backend.GetParams{ID: g.args[enqueueHead]}); err != nil || j.State != backend.StateActive {
		t.Fatalf("Get after enqueueing a claimed job again = %v, %v; want it still active", j, err)
	}
	if again, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute, Now: now}); err != nil || len(again.Jobs) != 0 {
		t.Fatalf("Claim after enqueueing a claimed job again = %d jobs, %v; want none", len(again.Jobs), err)
	}
}

// The lean enqueue script answers 0 when it wrote every job, else one
// outcome per job, in order, also for the jobs before the first taken id.
func TestIDCollisionLean(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "first", Queue: "q"}}})
	if err != nil {
		t.Fatal(err)
	}
	taken := res.Jobs[0].ID
	num, _ := queueNumOf(taken)
	p := backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "a", Queue: "q"}, {Type: "b", Queue: "q"}, {Type: "c", Queue: "q"}}}
	if err := p.Prepare(); err != nil {
		t.Fatal(err)
	}
	g := &enqueueGroup{name: "q", num: num, pos: []int{0, 1, 2}}
	if err := s.buildEnqueue(ctx, g, &p); err != nil {
		t.Fatal(err)
	}
	if !g.lean {
		t.Fatal("plain pending jobs do not go by the lean script")
	}
	run := func() []int64 { return runLean(t, s, g, num) }
	k := enqueueHead + enqueueStride // the second job's values
	own := g.args[k]
	g.args[k] = taken
	if got := run(); !slices.Equal(got, []int64{0, 2, 0}) {
		t.Fatalf("lean enqueue with the second id taken: outcomes %v, want [0 2 0]", got)
	}
	g.args[k] = own
	if got := run(); got != nil {
		t.Fatalf("lean enqueue written again with its own ids: outcomes %v, want a bare 0", got)
	}
}
