package pebble

import (
	"context"
	"fmt"
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

// claimReadsOf is how many records s's claims have read under mu.
func claimReadsOf(s *Store) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claimReads
}

// Two claimers of different queues taking turns, as the fetchers of a
// worker's two pools do, each find the records read ahead for them after
// the other's claim and prefetch: a claim reads under mu only the
// records of its queue's first claim.
func TestPrefetchPoolsTakeTurns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	queues := []string{"a", "b"}
	const per, max = 12, 4
	var jobs []backend.NewJob
	for i := range 2 * per {
		title := fmt.Sprintf("t%d", i)
		jobs = append(jobs, backend.NewJob{Queue: queues[i%2], Title: title, Payload: []byte("p-" + title)})
	}
	enqueue(t, s, t0, jobs...)
	s = reopen(t, s, dir) // records read from Pebble
	seen := make(map[string]bool)
	for round := range per / max {
		for _, q := range queues {
			before := claimReadsOf(s)
			res := claimAt(t, s, backend.ClaimParams{Queues: []string{q}, Max: max, Now: t0})
			reads := claimReadsOf(s) - before
			if len(res.Jobs) != max {
				t.Fatalf("round %d: claim of %s took %d jobs; want %d", round, q, len(res.Jobs), max)
			}
			checkClaimed(t, s, res.Jobs, seen)
			for _, j := range res.Jobs {
				if j.Queue != q {
					t.Fatalf("claim of %s took job %s of %s", q, j.Title, j.Queue)
				}
			}
			if want := map[bool]uint64{true: max, false: 0}[round == 0]; reads != want {
				t.Errorf("round %d: claim of %s read %d records under mu; want %d", round, q, reads, want)
			}
			completeAll(t, s, res.Jobs, t0)
			// What the full claim may have read ahead, made certain.
			s.prefetch([]string{q}, max, nil)
		}
	}
}

// enqueueIn enqueues n jobs in each of queues, titled by queue and rank.
func enqueueIn(t *testing.T, s *Store, n int, queues ...string) {
	t.Helper()
	var jobs []backend.NewJob
	for _, q := range queues {
		for i := range n {
			title := fmt.Sprintf("%s%d", q, i)
			jobs = append(jobs, backend.NewJob{Queue: q, Title: title, Payload: []byte("p-" + title)})
		}
	}
	enqueue(t, s, t0, jobs...)
}

// A prefetch for one set of queues goes on while one for another set is
// under way.
func TestPrefetchSetsAtOnce(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	enqueueIn(t, s, 4, "a", "b")
	s.prefetch([]string{"a"}, 4, nil)
	s.mu.Lock()
	a := s.pre.slot([]string{"a"})
	s.mu.Unlock()
	if a == nil {
		t.Fatal("no slot for a")
	}
	a.run.Lock() // as if a prefetch for a were under way
	s.prefetch([]string{"b"}, 4, nil)
	s.prefetch([]string{"a"}, 4, nil) // skipped
	a.run.Unlock()
	if n := prefetchedCount(s); n != 8 {
		t.Fatalf("records read ahead = %d; want 8", n)
	}
}

// A slot keeps only what its last prefetch found at the front of its
// queues; there are at most maxPrefetchSlots, and the least recently used
// goes with its records.
func TestPrefetchBounded(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	queues := make([]string, maxPrefetchSlots+2)
	for i := range queues {
		queues[i] = fmt.Sprintf("q%d", i)
	}
	enqueueIn(t, s, 3, queues...)
	s.prefetch(queues[:1], 3, nil)
	s.prefetch(queues[:1], 2, nil)
	if n := prefetchedCount(s); n != 2 {
		t.Fatalf("records read ahead for 2 after 3 = %d; want 2", n)
	}
	for _, q := range queues {
		s.prefetch([]string{q}, 3, nil)
	}
	s.mu.Lock()
	slots, held := len(s.pre.slots), len(s.pre.want)
	s.mu.Unlock()
	if slots != maxPrefetchSlots || held != 3*maxPrefetchSlots {
		t.Fatalf("%d slots holding %d ids; want %d and %d", slots, held, maxPrefetchSlots, 3*maxPrefetchSlots)
	}
	for i, q := range queues {
		before := claimReadsOf(s)
		if got := claim(t, s, t0, 3, q); len(got) != 3 {
			t.Fatalf("claim of %s took %d jobs; want 3", q, len(got))
		}
		want := uint64(0)
		if i < len(queues)-maxPrefetchSlots {
			want = 3 // its slot went
		}
		if reads := claimReadsOf(s) - before; reads != want {
			t.Errorf("claim of %s read %d records under mu; want %d", q, reads, want)
		}
	}
}

// A record read ahead for one set of queues that is at the front of
// another's is taken over by the other's prefetch, not read again, and
// not forgotten by the first set's next prefetch.
func TestPrefetchTakeOver(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	enqueueIn(t, s, 2, "a")
	enqueueIn(t, s, 4, "b")
	pairs := func() map[jobID]*jobPair {
		s.mu.Lock()
		defer s.mu.Unlock()
		m := make(map[jobID]*jobPair)
		for id, w := range s.pre.want {
			m[id] = w.pair
		}
		return m
	}
	s.prefetch([]string{"a", "b"}, 4, nil) // a0 a1 b0 b1
	first := pairs()
	s.prefetch([]string{"b"}, 4, nil) // b0 b1 taken over, b2 b3 read
	s.prefetch([]string{"a"}, 1, nil) // a0 taken over
	s.prefetch([]string{"a", "b"}, 2, nil)
	after := pairs()
	if len(first) != 4 || len(after) != 6 {
		t.Fatalf("records read ahead: %d, then %d; want 4, then 6", len(first), len(after))
	}
	for id, p := range first {
		if after[id] != p {
			t.Errorf("record %s read again or dropped", id)
		}
	}
	before := claimReadsOf(s)
	if got := claim(t, s, t0, 6, "a", "b"); len(got) != 6 {
		t.Fatalf("claimed %d jobs; want 6", len(got))
	}
	if reads := claimReadsOf(s) - before; reads != 0 {
		t.Errorf("claim read %d records under mu; want 0", reads)
	}
}

// A deleted job's entry left at the front of its queue does not stop a
// prefetch: the records of the jobs behind it are read ahead all the
// same, and the next claim reads under mu only the deleted job's (which
// it finds gone).
func TestPrefetchPastDeletedJob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	const n = 4
	var jobs []backend.NewJob
	for i := range n {
		title := fmt.Sprintf("t%d", i)
		jobs = append(jobs, backend.NewJob{Queue: "a", Title: title, Payload: []byte("p-" + title)})
	}
	res := enqueue(t, s, t0, jobs...)
	s = reopen(t, s, dir) // records read from Pebble
	if err := s.Delete(context.Background(), backend.DeleteParams{ID: res[0].ID, Now: t0}); err != nil {
		t.Fatal(err)
	}
	s.prefetch([]string{"a"}, n, nil)
	before := claimReadsOf(s)
	got := claimAt(t, s, backend.ClaimParams{Queues: []string{"a"}, Max: n, Now: t0})
	if len(got.Jobs) != n-1 {
		t.Fatalf("claim took %d jobs; want %d", len(got.Jobs), n-1)
	}
	for _, j := range got.Jobs {
		if j.ID == res[0].ID {
			t.Fatalf("claim took the deleted job %s", j.ID)
		}
	}
	checkClaimed(t, s, got.Jobs, make(map[string]bool))
	if reads := claimReadsOf(s) - before; reads != 1 {
		t.Errorf("claim read %d records under mu past a deleted job; want 1, the deleted job's", reads)
	}
	if err := checkPrefetchState(s, true); err != nil {
		t.Fatal(err)
	}
}
