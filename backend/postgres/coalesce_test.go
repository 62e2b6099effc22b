package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kyuhq/kyu/backend"
)

// holdLine makes s's enqueue line look busy, with lineCalls calls on their
// way, so that the Enqueue calls that come next wait in groups until
// releaseLine. The line must be idle.
func holdLine(t *testing.T, s *Store) {
	t.Helper()
	s.line.mu.Lock()
	defer s.line.mu.Unlock()
	if s.line.calls != 0 || len(s.line.waiting) != 0 {
		t.Fatalf("line busy: %d calls, %d groups waiting", s.line.calls, len(s.line.waiting))
	}
	s.line.calls = lineCalls
}

// releaseLine ends the calls holdLine made up: the first waiting group
// starts.
func releaseLine(s *Store) {
	for range lineCalls {
		s.lineDone()
	}
}

// lineState returns the members waiting in s's line (whether or not they
// left) and its groups.
func lineState(s *Store) (members, groups int) {
	s.line.mu.Lock()
	defer s.line.mu.Unlock()
	for _, g := range s.line.waiting {
		members += len(g.members)
	}
	return members, len(s.line.waiting)
}

// waitLine waits until cond holds of s's line.
func waitLine(t *testing.T, s *Store, what string, cond func(members, groups, calls int) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, g := lineState(s)
		s.line.mu.Lock()
		c := s.line.calls
		s.line.mu.Unlock()
		if cond(m, g, c) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("line: %s: still %d members, %d groups, %d calls", what, m, g, c)
		}
		time.Sleep(time.Millisecond)
	}
}

// lineCall is one Enqueue started in the background.
type lineCall struct {
	p    backend.EnqueueParams
	res  backend.EnqueueResult
	err  error
	done chan struct{}
}

// joinLine starts Enqueue(ctx, p) and waits until it waits in the line, so
// that calls join in the order of joinLine calls.
func joinLine(t *testing.T, s *Store, ctx context.Context, p backend.EnqueueParams) *lineCall {
	t.Helper()
	before, _ := lineState(s)
	c := &lineCall{p: p, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.res, c.err = s.Enqueue(ctx, p)
	}()
	waitLine(t, s, "join", func(m, _, _ int) bool {
		select {
		case <-c.done:
			t.Fatalf("enqueue returned without waiting: %+v, %v", c.res, c.err)
		default:
		}
		return m > before
	})
	return c
}

// wait returns the call's outcome.
func (c *lineCall) wait(t *testing.T) (backend.EnqueueResult, error) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatal("enqueue did not return")
	}
	return c.res, c.err
}

// countJobs returns how many jobs s's table holds.
func countJobs(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+s.schema+".jobs").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCoalescedEnqueueGroup: calls that wait in the line go in one group
// with the outcome of running one after another in order: each job with
// its caller's clock, a unique key asked for by two callers going to the
// first, a key freed by UniqueFor between two callers' clocks going to the
// second, and keys held before the group reported as such.
func TestCoalescedEnqueueGroup(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := context.Background()
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
	one := func(sec int, payload, key string, uniqueFor time.Duration) backend.EnqueueParams {
		return backend.EnqueueParams{Now: at(sec), Jobs: []backend.NewJob{{
			Type: "t", Queue: "q", Payload: []byte(payload), UniqueKey: key, UniqueFor: uniqueFor,
		}}}
	}
	held, err := s.Enqueue(ctx, one(0, "held", "old", 0))
	if err != nil {
		t.Fatal(err)
	}

	holdLine(t, s)
	calls := []*lineCall{
		joinLine(t, s, ctx, one(1, "c0", "", 0)),
		joinLine(t, s, ctx, one(2, "c1", "k", 0)),
		joinLine(t, s, ctx, one(3, "c2", "k", 0)), // 2: a duplicate of 1
		joinLine(t, s, ctx, backend.EnqueueParams{Now: at(4), Jobs: []backend.NewJob{ // 3: its second job a duplicate of its first
			{Type: "t", Queue: "q", Payload: []byte("c3a"), UniqueKey: "k2"},
			{Type: "t", Queue: "q", Payload: []byte("c3b"), UniqueKey: "k2"},
			{Type: "t", Queue: "q", Payload: []byte("c3c"), RunAt: at(100)},
		}}),
		joinLine(t, s, ctx, one(5, "c4", "k2", 0)),          // 4: a duplicate of 3's first
		joinLine(t, s, ctx, one(6, "c5", "old", 0)),         // 5: a duplicate of held
		joinLine(t, s, ctx, one(7, "c6", "t", time.Second)), // 6: holds "t" until at(8)
		joinLine(t, s, ctx, one(9, "c7", "t", 0)),           // 7: takes "t" over
	}
	if m, g := lineState(s); m != len(calls) || g != 1 {
		t.Fatalf("line: %d members in %d groups, want %d in 1", m, g, len(calls))
	}
	releaseLine(s)
	res := make([][]backend.EnqueuedJob, len(calls))
	for i, c := range calls {
		r, err := c.wait(t)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if len(r.Jobs) != len(c.p.Jobs) {
			t.Fatalf("call %d: %d results for %d jobs", i, len(r.Jobs), len(c.p.Jobs))
		}
		res[i] = r.Jobs
	}
	dupOf := func(i, j int, want backend.EnqueuedJob) {
		t.Helper()
		if got := res[i][j]; !got.Duplicate || got.ID != want.ID {
			t.Errorf("call %d job %d: %+v, want a duplicate of %s", i, j, got, want.ID)
		}
	}
	dupOf(2, 0, res[1][0])
	dupOf(3, 1, res[3][0])
	dupOf(4, 0, res[3][0])
	dupOf(5, 0, held.Jobs[0])
	if r := res[7][0]; r.Duplicate || r.ID == res[6][0].ID {
		t.Errorf("call 7: %+v, want a new job holding the key UniqueFor freed", r)
	}
	for i, c := range calls {
		for j, nj := range c.p.Jobs {
			r := res[i][j]
			if r.Duplicate {
				continue
			}
			job, err := s.Get(ctx, backend.GetParams{ID: r.ID})
			if err != nil {
				t.Fatalf("call %d job %d: %v", i, j, err)
			}
			wantRun := c.p.Now
			if !nj.RunAt.IsZero() {
				wantRun = nj.RunAt
			}
			if string(job.Payload) != string(nj.Payload) || !job.CreatedAt.Equal(c.p.Now) || !job.RunAt.Equal(wantRun) {
				t.Errorf("call %d job %d: payload %q created %v run at %v, want %q %v %v",
					i, j, job.Payload, job.CreatedAt, job.RunAt, nj.Payload, c.p.Now, wantRun)
			}
		}
	}
	// The key "t" is call 7's now: a later enqueue is its duplicate.
	again, err := s.Enqueue(ctx, one(10, "again", "t", 0))
	if err != nil {
		t.Fatal(err)
	}
	if r := again.Jobs[0]; !r.Duplicate || r.ID != res[7][0].ID {
		t.Errorf("after the group: %+v, want a duplicate of %s", r, res[7][0].ID)
	}
	waitLine(t, s, "idle", func(m, g, c int) bool { return m == 0 && g == 0 && c == 0 })
}

// TestCoalescedEnqueueSharedError: when a group's transaction fails, every
// caller in it gets the error and none of their jobs is written.
func TestCoalescedEnqueueSharedError(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := context.Background()
	_, err := s.pool.Exec(ctx, `CREATE FUNCTION `+s.schema+`.boom() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.payload = 'boom'::bytea THEN RAISE EXCEPTION 'boom'; END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER boom BEFORE INSERT ON `+s.schema+`.jobs FOR EACH ROW EXECUTE FUNCTION `+s.schema+`.boom()`)
	if err != nil {
		t.Fatal(err)
	}
	job := func(payload, key string) backend.EnqueueParams {
		return backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{{Type: "t", Queue: "q", Payload: []byte(payload), UniqueKey: key}}}
	}
	for _, keyed := range []bool{false, true} {
		key := ""
		if keyed {
			key = "k"
		}
		holdLine(t, s)
		calls := []*lineCall{
			joinLine(t, s, ctx, job("a", key)),
			joinLine(t, s, ctx, job("boom", "")),
			joinLine(t, s, ctx, job("c", "")),
		}
		releaseLine(s)
		for i, c := range calls {
			_, err := c.wait(t)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Message != "boom" {
				t.Errorf("keyed %v, call %d: %v, want the group's error", keyed, i, err)
			}
		}
		if n := countJobs(t, s); n != 0 {
			t.Errorf("keyed %v: %d jobs written", keyed, n)
		}
		waitLine(t, s, "idle", func(m, g, c int) bool { return m == 0 && g == 0 && c == 0 })
	}
	// The key the failed group asked for is free.
	r, err := s.Enqueue(ctx, job("d", "k"))
	if err != nil || r.Jobs[0].Duplicate {
		t.Fatalf("after the failed group: %+v, %v", r, err)
	}
}

// TestCoalescedEnqueueCancel: a caller whose ctx ends while its group
// waits returns at once with ctx's error and its job is left out; the
// others of the group are written, and a group all of whose callers left
// passes its turn on.
func TestCoalescedEnqueueCancel(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := context.Background()
	job := func(payload string) backend.EnqueueParams {
		return backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{{Type: "t", Queue: "q", Payload: []byte(payload)}}}
	}

	holdLine(t, s)
	cctx, cancel := context.WithCancel(ctx)
	first := joinLine(t, s, ctx, job("kept"))
	left := joinLine(t, s, cctx, job("left"))
	cancel()
	if _, err := left.wait(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v, want context.Canceled", err)
	}
	releaseLine(s)
	r, err := first.wait(t)
	if err != nil {
		t.Fatal(err)
	}
	if n := countJobs(t, s); n != 1 {
		t.Fatalf("%d jobs written, want 1", n)
	}
	if j, err := s.Get(ctx, backend.GetParams{ID: r.Jobs[0].ID}); err != nil || string(j.Payload) != "kept" {
		t.Fatalf("the kept job: %v, %v", j, err)
	}
	waitLine(t, s, "idle", func(m, g, c int) bool { return m == 0 && g == 0 && c == 0 })

	// A group whose only caller left.
	holdLine(t, s)
	cctx, cancel = context.WithCancel(ctx)
	left = joinLine(t, s, cctx, job("left too"))
	cancel()
	if _, err := left.wait(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v, want context.Canceled", err)
	}
	releaseLine(s)
	waitLine(t, s, "idle", func(m, g, c int) bool { return m == 0 && g == 0 && c == 0 })
	if _, err := s.Enqueue(ctx, job("after")); err != nil {
		t.Fatal(err)
	}
	if n := countJobs(t, s); n != 2 {
		t.Fatalf("%d jobs written, want 2", n)
	}
}

// TestCoalescedEnqueueConcurrent: single-job enqueues from many goroutines,
// which share transactions, each get their own job (payload, clock), and
// every unique key is written once, the other askers seeing its holder.
func TestCoalescedEnqueueConcurrent(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := context.Background()
	const producers, each, keys = 20, 25, 40
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	type out struct {
		res     backend.EnqueuedJob
		payload string
		now     time.Time
		key     string
	}
	outs := make([][]out, producers)
	var wg sync.WaitGroup
	for g := range producers {
		wg.Go(func() {
			for i := range each {
				n := g*each + i
				o := out{payload: fmt.Sprint("job ", n), now: base.Add(time.Duration(n) * time.Millisecond)}
				nj := backend.NewJob{Type: "t", Queue: fmt.Sprint("q", n%2), Payload: []byte(o.payload)}
				if n%3 == 0 {
					o.key = fmt.Sprint("k", n%keys)
					nj.Queue, nj.UniqueKey = "q0", o.key
				}
				res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: o.now, Jobs: []backend.NewJob{nj}})
				if err != nil {
					t.Error(err)
					return
				}
				o.res = res.Jobs[0]
				outs[g] = append(outs[g], o)
			}
		})
	}
	wg.Wait()
	holders := map[string]string{}
	for _, l := range outs {
		for _, o := range l {
			if o.key != "" && !o.res.Duplicate {
				if h, ok := holders[o.key]; ok {
					t.Fatalf("unique key %s written twice: %s and %s", o.key, h, o.res.ID)
				}
				holders[o.key] = o.res.ID
			}
		}
	}
	for _, l := range outs {
		for _, o := range l {
			if o.res.Duplicate {
				if holders[o.key] != o.res.ID {
					t.Fatalf("duplicate of key %s names %s, the holder is %s", o.key, o.res.ID, holders[o.key])
				}
				continue
			}
			j, err := s.Get(ctx, backend.GetParams{ID: o.res.ID})
			if err != nil {
				t.Fatal(err)
			}
			if string(j.Payload) != o.payload || !j.CreatedAt.Equal(o.now) {
				t.Fatalf("job %s: payload %q created %v, want %q %v", o.res.ID, j.Payload, j.CreatedAt, o.payload, o.now)
			}
		}
	}
	waitLine(t, s, "idle", func(m, g, c int) bool { return m == 0 && g == 0 && c == 0 })
}
