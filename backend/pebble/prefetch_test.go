package pebble

import (
	"context"
	"testing"

	"github.com/kyuhq/kyu/backend"
)

// prefetchedCount is how many records read ahead s holds.
func prefetchedCount(s *Store) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, w := range s.pre.want {
		if w.pair != nil {
			n++
		}
	}
	return n
}

// A claim takes the records read ahead for it, and hands out what a claim
// reading them itself would: the jobs' current records and payloads.
func TestPrefetchedRecordsClaimed(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	enqueue(t, s, t0,
		backend.NewJob{Title: "a", Payload: []byte("pa")},
		backend.NewJob{Title: "b", Payload: []byte("pb")},
		backend.NewJob{Title: "c"},
	)
	s.prefetch([]string{backend.DefaultQueue}, 10, nil)
	if n := prefetchedCount(s); n != 3 {
		t.Fatalf("records read ahead = %d; want 3", n)
	}
	got := claim(t, s, t0, 10)
	want := []struct{ title, payload string }{{"a", "pa"}, {"b", "pb"}, {"c", ""}}
	if len(got) != len(want) {
		t.Fatalf("claimed %d jobs; want %d", len(got), len(want))
	}
	for i, j := range got {
		if j.Title != want[i].title || string(j.Payload) != want[i].payload || j.State != backend.StateActive || j.Attempt != 1 {
			t.Errorf("job %d = %q payload %q state %s attempt %d; want %q payload %q, active, attempt 1",
				i, j.Title, j.Payload, j.State, j.Attempt, want[i].title, want[i].payload)
		}
	}
	if n := prefetchedCount(s); n != 0 {
		t.Errorf("records read ahead after the claim = %d; want 0 (taken)", n)
	}
}

// A record read ahead is dropped when the job is written, even once that
// write is durable: a deleted pending job leaves a stale entry in its
// queue's ready index, and a claim must not hand it out from the record
// read before the delete.
func TestPrefetchedRecordDroppedOnWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, t.TempDir(), Options{})
	res := enqueue(t, s, t0,
		backend.NewJob{Title: "kept"},
		backend.NewJob{Title: "deleted"},
		backend.NewJob{Title: "kept too"},
	)
	s.prefetch([]string{backend.DefaultQueue}, 10, nil)
	if n := prefetchedCount(s); n != 3 {
		t.Fatalf("records read ahead = %d; want 3", n)
	}
	if err := s.Delete(ctx, backend.DeleteParams{ID: res[1].ID, Now: t0}); err != nil {
		t.Fatal(err)
	}
	got := claim(t, s, t0, 10)
	if len(got) != 2 || got[0].Title != "kept" || got[1].Title != "kept too" {
		var titles []string
		for _, j := range got {
			titles = append(titles, j.Title)
		}
		t.Fatalf("claimed %q; want the two kept jobs", titles)
	}
	if _, err := s.Get(ctx, backend.GetParams{ID: res[1].ID}); err == nil {
		t.Fatalf("the deleted job is back")
	}
}

// Jobs whose records are in memory (a write in flight, or active) are
// not read ahead.
func TestPrefetchSkipsJobsInMemory(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	enqueue(t, s, t0, backend.NewJob{}, backend.NewJob{})
	s.mu.Lock()
	qi := s.idx.queues[backend.DefaultQueue]
	ids := qi.ready.peek(nil, 10)
	j, sd, err := s.load(ids[0])
	if err != nil || j == nil {
		s.mu.Unlock()
		t.Fatalf("load = %v, %v", j, err)
	}
	s.group()
	s.markDirty(s.pending, ids[0], j, sd) // as if a write were in flight
	s.mu.Unlock()
	s.prefetch([]string{backend.DefaultQueue}, 10, nil)
	s.mu.Lock()
	_, first := s.pre.want[ids[0]]
	_, second := s.pre.want[ids[1]]
	s.mu.Unlock()
	if first || !second {
		t.Fatalf("read ahead: job in memory %v, other %v; want false, true", first, second)
	}
}
