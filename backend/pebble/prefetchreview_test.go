package pebble

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// prefetchQueues are the queues the prefetch review tests claim from.
var prefetchQueues = []string{"q", "other"}

// checkClaimed checks the jobs a claim handed out against Get: the same
// state, attempt, lease, priority, queue, type and payload (each job's
// payload is "p-" and its title), and that no job is handed out twice at
// one attempt (seen).
func checkClaimed(t *testing.T, s *Store, jobs []*backend.Job, seen map[string]bool) {
	t.Helper()
	for _, j := range jobs {
		key := fmt.Sprintf("%s/%d", j.ID, j.Attempt)
		if seen[key] {
			t.Fatalf("job %s (%s) handed out twice at attempt %d", j.ID, j.Title, j.Attempt)
		}
		seen[key] = true
		if string(j.Payload) != "p-"+j.Title {
			t.Errorf("job %s (%s): payload %q; want %q", j.ID, j.Title, j.Payload, "p-"+j.Title)
		}
		g := get(t, s, j.ID)
		if j.State != backend.StateActive || g.State != j.State || g.Attempt != j.Attempt ||
			g.LeaseToken != j.LeaseToken || g.Priority != j.Priority || g.Queue != j.Queue ||
			g.Type != j.Type || g.Title != j.Title || string(g.Payload) != string(j.Payload) {
			t.Errorf("claimed %s: %s attempt %d token %d prio %d queue %s type %s title %q payload %q;\n"+
				"Get: %s attempt %d token %d prio %d queue %s type %s title %q payload %q",
				j.ID, j.State, j.Attempt, j.LeaseToken, j.Priority, j.Queue, j.Type, j.Title, j.Payload,
				g.State, g.Attempt, g.LeaseToken, g.Priority, g.Queue, g.Type, g.Title, g.Payload)
		}
	}
}

// completeAll completes claimed jobs at now.
func completeAll(t *testing.T, s *Store, jobs []*backend.Job, now time.Time) {
	t.Helper()
	if len(jobs) == 0 {
		return
	}
	items := make([]backend.CompleteItem, len(jobs))
	for i, j := range jobs {
		items[i] = backend.CompleteItem{Lease: leaseOf(j)}
	}
	res, err := s.Complete(context.Background(), backend.CompleteParams{Items: items, Now: now})
	mustOK(t, "Complete", res, err)
}

// claimAt claims with p filled in: prefetchQueues, a minute's lease.
func claimAt(t *testing.T, s *Store, p backend.ClaimParams) backend.ClaimResult {
	t.Helper()
	if p.Queues == nil {
		p.Queues = prefetchQueues
	}
	p.Lease, p.WorkerID = time.Minute, "w"
	res, err := s.Claim(context.Background(), p)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return res
}

// TestPrefetchedJobsChanged changes the jobs whose records a full claim's
// prefetch read, in every way a job can change before the next claim, and
// checks that the claims after it hand out each job's current record and
// payload, once, and lose none.
func TestPrefetchedJobsChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	later := t0.Add(24 * time.Hour)
	type change struct {
		name string
		// change acts on the jobs ids (ids[0:2] completed, the others
		// pending and read ahead) and returns the titles the drain must
		// end with completed (nil: all of the pending ones).
		change func(t *testing.T, s *Store, ids []string, seen map[string]bool) []string
	}
	reimport := func(t *testing.T, s *Store, id, queue, title string, prio int) {
		t.Helper()
		j := get(t, s, id)
		if err := s.Delete(ctx, backend.DeleteParams{ID: id, Now: t0}); err != nil {
			t.Fatal(err)
		}
		j.Queue, j.Title, j.Priority, j.Payload = queue, title, prio, []byte("p-"+title)
		res, err := s.Import(ctx, backend.ImportParams{Jobs: []*backend.Job{j}, Now: t0})
		if err != nil || res.Items[0].Outcome != backend.ImportCreated {
			t.Fatalf("Import = %+v, %v", res, err)
		}
	}
	all := []string{"t2", "t3", "t4", "t5", "t6", "t7"}
	cases := []change{
		{"cancelled", func(t *testing.T, s *Store, ids []string, _ map[string]bool) []string {
			if _, err := s.Cancel(ctx, backend.CancelParams{ID: ids[2], Now: t0}); err != nil {
				t.Fatal(err)
			}
			return all[1:]
		}},
		{"deleted", func(t *testing.T, s *Store, ids []string, _ map[string]bool) []string {
			if err := s.Delete(ctx, backend.DeleteParams{ID: ids[3], Now: t0}); err != nil {
				t.Fatal(err)
			}
			return slices.Delete(slices.Clone(all), 1, 2)
		}},
		{"cancelled and retried", func(t *testing.T, s *Store, ids []string, _ map[string]bool) []string {
			if _, err := s.Cancel(ctx, backend.CancelParams{ID: ids[2], Now: t0}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Retry(ctx, backend.RetryParams{ID: ids[2], Now: t0}); err != nil {
				t.Fatal(err)
			}
			return nil
		}},
		{"reimported", func(t *testing.T, s *Store, ids []string, _ map[string]bool) []string {
			reimport(t, s, ids[2], "q", "new2", 5)     // same queue, first
			reimport(t, s, ids[3], "other", "new3", 0) // moved to another queue
			reimport(t, s, ids[4], "q", "new4", -5)    // same queue, last
			return []string{"new2", "new3", "new4", "t5", "t6", "t7"}
		}},
		{"paused", func(t *testing.T, s *Store, ids []string, _ map[string]bool) []string {
			paused, running := true, false
			if _, err := s.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: "q", Paused: &paused, Now: t0}); err != nil {
				t.Fatal(err)
			}
			if res := claimAt(t, s, backend.ClaimParams{Max: 10, Now: later}); len(res.Jobs) != 0 {
				t.Fatalf("claim of a paused queue took %d jobs", len(res.Jobs))
			}
			if _, err := s.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: "q", Paused: &running, Now: t0}); err != nil {
				t.Fatal(err)
			}
			return nil
		}},
		{"claimed by ClaimWait, failed and retried", func(t *testing.T, s *Store, ids []string, seen map[string]bool) []string {
			res, err := s.ClaimWait(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute, WorkerID: "other", Now: t0})
			if err != nil || len(res.Jobs) != 1 {
				t.Fatalf("ClaimWait = %d jobs, %v", len(res.Jobs), err)
			}
			checkClaimed(t, s, res.Jobs, seen)
			fr, err := s.Fail(ctx, backend.FailParams{Items: []backend.FailItem{{Lease: leaseOf(res.Jobs[0]), Message: "x", RetryAt: t0.Add(time.Hour)}}, Now: t0})
			mustOK(t, "Fail", fr, err)
			return nil
		}},
		{"claimed on another queue, lease recovered", func(t *testing.T, s *Store, ids []string, seen map[string]bool) []string {
			reimport(t, s, ids[2], "other", "new2", 0)
			res := claimAt(t, s, backend.ClaimParams{Queues: []string{"other"}, Max: 1, Now: t0})
			if len(res.Jobs) != 1 || res.Jobs[0].Title != "new2" {
				t.Fatalf("claim of other = %+v", res.Jobs)
			}
			checkClaimed(t, s, res.Jobs, seen)
			if _, err := s.RecoverLeases(ctx, backend.MaintenanceParams{Now: t0.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			return []string{"new2", "t3", "t4", "t5", "t6", "t7"}
		}},
		{"cancelled and expired", func(t *testing.T, s *Store, ids []string, _ map[string]bool) []string {
			if _, err := s.Cancel(ctx, backend.CancelParams{ID: ids[5], Now: t0}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ApplyRetention(ctx, backend.MaintenanceParams{Now: t0.Add(10000 * time.Hour)}); err != nil {
				t.Fatal(err)
			}
			return slices.Delete(slices.Clone(all), 3, 4)
		}},
		{"types filter", func(t *testing.T, s *Store, ids []string, seen map[string]bool) []string {
			res := claimAt(t, s, backend.ClaimParams{Max: 10, Types: []string{"b"}, Now: t0})
			if len(res.Jobs) != 3 {
				t.Fatalf("claim of type b took %d jobs; want 3", len(res.Jobs))
			}
			checkClaimed(t, s, res.Jobs, seen)
			for _, j := range res.Jobs {
				if j.Type != "b" {
					t.Errorf("claim of type b took %s of type %s", j.Title, j.Type)
				}
			}
			completeAll(t, s, res.Jobs, t0)
			return nil
		}},
		{"byte budget", func(t *testing.T, s *Store, ids []string, seen map[string]bool) []string {
			for range 3 {
				res := claimAt(t, s, backend.ClaimParams{Max: 10, MaxBytes: 5, Now: t0})
				if len(res.Jobs) != 1 || !res.Truncated {
					t.Fatalf("claim within 5 bytes took %d jobs, truncated %v; want 1, true", len(res.Jobs), res.Truncated)
				}
				checkClaimed(t, s, res.Jobs, seen)
				completeAll(t, s, res.Jobs, t0)
			}
			return nil
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := openStore(t, dir, Options{})
			jobs := make([]backend.NewJob, 8)
			for i := range jobs {
				title := fmt.Sprintf("t%d", i)
				jobs[i] = backend.NewJob{Queue: "q", Type: []string{"a", "b"}[i%2], Title: title, Payload: []byte("p-" + title)}
			}
			enq := enqueue(t, s, t0, jobs...)
			ids := make([]string, len(enq))
			for i, e := range enq {
				ids[i] = e.ID
			}
			s = reopen(t, s, dir) // records and payloads read from Pebble
			seen := make(map[string]bool)
			first := claimAt(t, s, backend.ClaimParams{Max: 2, Now: t0})
			if len(first.Jobs) != 2 {
				t.Fatalf("first claim took %d jobs", len(first.Jobs))
			}
			checkClaimed(t, s, first.Jobs, seen)
			completeAll(t, s, first.Jobs, t0)
			// What the full claim may have read ahead, made certain.
			s.prefetch(prefetchQueues, 10, nil)
			if n := prefetchedCount(s); n != 6 {
				t.Fatalf("records read ahead = %d; want 6", n)
			}
			want := c.change(t, s, ids, seen)
			if want == nil {
				want = all
			}
			for {
				res := claimAt(t, s, backend.ClaimParams{Max: 2, Now: later})
				if len(res.Jobs) == 0 {
					break
				}
				checkClaimed(t, s, res.Jobs, seen)
				completeAll(t, s, res.Jobs, later)
			}
			var done []string
			for _, q := range prefetchQueues {
				l, err := s.List(ctx, backend.ListParams{Queue: q, State: backend.StateCompleted, Limit: 100})
				if err != nil {
					t.Fatal(err)
				}
				for _, j := range l.Jobs {
					done = append(done, j.Title)
				}
				for _, st := range []backend.State{backend.StatePending, backend.StateActive, backend.StateRetry, backend.StateScheduled} {
					l, err := s.List(ctx, backend.ListParams{Queue: q, State: st, Limit: 100})
					if err != nil {
						t.Fatal(err)
					}
					if len(l.Jobs) != 0 {
						t.Errorf("queue %s: %d jobs left %s", q, len(l.Jobs), st)
					}
				}
			}
			done = slices.DeleteFunc(done, func(s string) bool { return s == "t0" || s == "t1" })
			slices.Sort(done)
			slices.Sort(want)
			if !slices.Equal(done, want) {
				t.Errorf("completed %q; want %q", done, want)
			}
		})
	}
}

// TestPrefetchChurn runs full claims, which read ahead, against deletes
// and re-imports of the same ids with another payload, priority and
// queue: every job handed out matches Get, carries its own payload, and
// each incarnation is handed out once; none is lost.
func TestPrefetchChurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	const n = 300
	jobs := make([]backend.NewJob, n)
	for i := range jobs {
		title := fmt.Sprintf("j%d.0", i)
		jobs[i] = backend.NewJob{Queue: prefetchQueues[i%2], Title: title, Payload: []byte("p-" + title)}
	}
	enq := enqueue(t, s, t0, jobs...)
	s = reopen(t, s, dir)

	var mu sync.Mutex
	handed := make(map[string]int) // title -> times handed out
	imported := make(map[string]bool)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	// The mutator deletes pending jobs and imports them again.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for round := 1; ; round++ {
			for i := round % 7; i < n; i += 7 {
				select {
				case <-stop:
					return
				default:
				}
				j, err := s.Get(ctx, backend.GetParams{ID: enq[i].ID})
				if err != nil {
					errc <- err
					return
				}
				if j.State != backend.StatePending {
					continue
				}
				if err := s.Delete(ctx, backend.DeleteParams{ID: j.ID, Now: t0}); errors.Is(err, backend.ErrJobActive) {
					continue
				} else if err != nil {
					errc <- err
					return
				}
				j.Title = fmt.Sprintf("j%d.%d", i, round)
				j.Payload = []byte("p-" + j.Title)
				j.Priority = round % 3
				j.Queue = prefetchQueues[round%2]
				res, err := s.Import(ctx, backend.ImportParams{Jobs: []*backend.Job{j}, Now: t0})
				if err != nil || res.Items[0].Outcome != backend.ImportCreated {
					errc <- fmt.Errorf("Import = %+v, %v", res, err)
					return
				}
				mu.Lock()
				imported[j.Title] = true
				mu.Unlock()
			}
		}
	}()
	claimer := func(queues []string) {
		defer wg.Done()
		for {
			res, err := s.Claim(ctx, backend.ClaimParams{Queues: queues, Max: 4, Lease: time.Minute, WorkerID: "w", Now: t0})
			if err != nil {
				errc <- err
				return
			}
			if len(res.Jobs) == 0 {
				select {
				case <-stop:
					return
				default:
					continue
				}
			}
			items := make([]backend.CompleteItem, len(res.Jobs))
			for i, j := range res.Jobs {
				if string(j.Payload) != "p-"+j.Title {
					errc <- fmt.Errorf("job %s (%s) handed out with payload %q", j.ID, j.Title, j.Payload)
				}
				g, err := s.Get(ctx, backend.GetParams{ID: j.ID})
				if err != nil || g.Title != j.Title || g.Priority != j.Priority || g.Queue != j.Queue ||
					g.State != backend.StateActive || g.Attempt != j.Attempt || g.LeaseToken != j.LeaseToken {
					errc <- fmt.Errorf("job %s handed out as %s/%s prio %d attempt %d token %d; Get: %+v, %v",
						j.ID, j.Title, j.Queue, j.Priority, j.Attempt, j.LeaseToken, g, err)
				}
				mu.Lock()
				handed[j.Title]++
				mu.Unlock()
				items[i] = backend.CompleteItem{Lease: leaseOf(j)}
			}
			cr, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: t0})
			if err != nil {
				errc <- err
				return
			}
			for i, e := range cr.Errors {
				if e != nil {
					errc <- fmt.Errorf("Complete %s: %w", res.Jobs[i].ID, e)
				}
			}
		}
	}
	wg.Add(3)
	go claimer(prefetchQueues)
	go claimer([]string{"other", "q"})
	go claimer([]string{"q"})
	// Run until every job is completed (or an error), then stop.
	deadline := time.Now().Add(30 * time.Second)
	for done := false; !done; {
		select {
		case err := <-errc:
			close(stop)
			wg.Wait()
			t.Fatal(err)
		default:
		}
		st, err := s.Stats(ctx, backend.StatsParams{Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		completed := int64(0)
		for _, q := range st.Queues {
			completed += q.Counts[backend.StateCompleted]
		}
		done = completed == n
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("%d of %d jobs completed after 30 s", completed, n)
		}
		if !done {
			time.Sleep(time.Millisecond) // polling a condition, with a deadline
		}
	}
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	for i, e := range enq {
		j := get(t, s, e.ID)
		if j.State != backend.StateCompleted || handed[j.Title] != 1 {
			t.Errorf("job %d (%s): %s, handed out %d times", i, j.Title, j.State, handed[j.Title])
		}
	}
	for title, k := range handed {
		if k != 1 {
			t.Errorf("%s handed out %d times", title, k)
		}
	}
	t.Logf("%d re-imports", len(imported))
}

// payloadKeys returns the ids that have a payload key in Pebble.
func payloadKeys(t *testing.T, s *Store) []string {
	t.Helper()
	var ids []string
	err := s.scan(prefixPayload, func(k, v []byte) error {
		ids = append(ids, jobID(k[1:]).String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	return ids
}

// A batch enqueue whose jobs repeat a JID writes the payloads of the jobs
// it writes, and only theirs.
func TestEnqueueBatchDuplicateJIDPayloads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	res := enqueue(t, s, t0,
		backend.NewJob{Title: "a", JID: "x", Payload: []byte("p-a")},
		backend.NewJob{Title: "b", JID: "x", Payload: []byte("p-b")},
		backend.NewJob{Title: "c", Payload: []byte("p-c")},
		backend.NewJob{Title: "d", JID: "x", Payload: []byte("p-d")},
		backend.NewJob{Title: "e", JID: "y"},
		backend.NewJob{Title: "f", JID: "y", Payload: []byte("p-f")},
	)
	for i, dup := range []bool{false, true, false, true, false, true} {
		if res[i].Duplicate != dup {
			t.Fatalf("job %d: duplicate %v; want %v", i, res[i].Duplicate, dup)
		}
	}
	s = reopen(t, s, dir)
	want := []string{res[0].ID, res[2].ID}
	slices.Sort(want)
	if got := payloadKeys(t, s); !slices.Equal(got, want) {
		t.Fatalf("payload keys of %q; want %q (a, c)", got, want)
	}
	seen := make(map[string]bool)
	got := claimAt(t, s, backend.ClaimParams{Queues: []string{backend.DefaultQueue}, Max: 10, Now: t0})
	if len(got.Jobs) != 3 {
		t.Fatalf("claimed %d jobs; want 3", len(got.Jobs))
	}
	for _, j := range got.Jobs {
		if j.Title == "e" {
			j.Title = "" // no payload: "p-" + "" is not it, so check it apart
			if j.Payload != nil {
				t.Errorf("job e handed out with payload %q", j.Payload)
			}
			continue
		}
		checkClaimed(t, s, []*backend.Job{j}, seen)
	}
}

// A batch enqueue that fails on a JID after writing some of its jobs (a
// damaged JID key breaks the store) writes the payloads of the jobs it
// wrote: none is left without its payload, and no payload without its
// job.
func TestEnqueueBatchJIDErrorPayloads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	if err := s.db.Set(jidKey("bad"), []byte("not an id"), nil); err != nil {
		t.Fatal(err)
	}
	_, err := s.Enqueue(context.Background(), backend.EnqueueParams{Now: t0, Jobs: []backend.NewJob{
		{Type: "test", Title: "a", Payload: []byte("p-a")},
		{Type: "test", Title: "b", JID: "ok", Payload: []byte("p-b")},
		{Type: "test", Title: "c", JID: "bad", Payload: []byte("p-c")},
		{Type: "test", Title: "d", Payload: []byte("p-d")},
	}})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Enqueue = %v; want ErrCorrupt", err)
	}
	_ = s.Close()
	s = openStore(t, dir, Options{})
	l, err := s.List(context.Background(), backend.ListParams{Queue: backend.DefaultQueue, State: backend.StatePending, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range l.Jobs {
		if j.Title != "a" && j.Title != "b" {
			t.Errorf("job %s written after the failed JID", j.Title)
		}
		ids = append(ids, j.ID)
	}
	slices.Sort(ids)
	if got := payloadKeys(t, s); !slices.Equal(got, ids) {
		t.Fatalf("payload keys of %q; jobs %q", got, ids)
	}
	seen := make(map[string]bool)
	got := claimAt(t, s, backend.ClaimParams{Queues: []string{backend.DefaultQueue}, Max: 10, Now: t0})
	if len(got.Jobs) != len(ids) {
		t.Fatalf("claimed %d jobs; want %d", len(got.Jobs), len(ids))
	}
	checkClaimed(t, s, got.Jobs, seen)
}

// Close while full claims read ahead: it waits for them, and every job a
// claim handed out is active after a reopen with the lease it was given,
// while the others are pending.
func TestPrefetchClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	const n = 400
	jobs := make([]backend.NewJob, n)
	for i := range jobs {
		title := fmt.Sprintf("j%d", i)
		jobs[i] = backend.NewJob{Queue: "q", Title: title, Payload: []byte("p-" + title)}
	}
	enqueue(t, s, t0, jobs...)
	s = reopen(t, s, dir)
	var mu sync.Mutex
	handed := make(map[string]*backend.Job)
	claims := make(chan struct{}, 64)
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				res, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 3, Lease: time.Minute, WorkerID: "w", Now: t0})
				if errors.Is(err, backend.ErrClosed) {
					return
				}
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				for _, j := range res.Jobs {
					if handed[j.ID] != nil {
						errc <- fmt.Errorf("job %s handed out twice", j.ID)
					}
					if string(j.Payload) != "p-"+j.Title {
						errc <- fmt.Errorf("job %s handed out with payload %q", j.Title, j.Payload)
					}
					handed[j.ID] = j
				}
				mu.Unlock()
				select {
				case claims <- struct{}{}:
				default:
				}
				if len(res.Jobs) == 0 {
					return
				}
			}
		}()
	}
	for range 5 {
		<-claims
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	s = openStore(t, dir, Options{})
	active := 0
	for _, st := range []backend.State{backend.StateActive, backend.StatePending} {
		l, err := s.List(ctx, backend.ListParams{Queue: "q", State: st, Limit: n})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range l.Jobs {
			h := handed[j.ID]
			switch {
			case st == backend.StateActive && (h == nil || h.LeaseToken != j.LeaseToken || h.Attempt != j.Attempt):
				t.Errorf("job %s active after reopen, token %d; handed out %v", j.Title, j.LeaseToken, h != nil)
			case st == backend.StatePending && h != nil:
				t.Errorf("job %s handed out, pending after reopen", j.Title)
			}
			if st == backend.StateActive {
				active++
			}
		}
	}
	if active != len(handed) {
		t.Errorf("%d jobs active after reopen; %d handed out", active, len(handed))
	}
}
