package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// checkPrefetchState checks the records read ahead under mu: no more
// slots and ids than the bounds; no id registered whose record is in
// memory (a write in flight, or active); every record read ahead exactly
// the committed one, which a claim would read under mu. With quiescent
// (no prefetch under way) it also checks that every registration is read
// and belongs to the last prefetch of a slot that lists it.
func checkPrefetchState(s *Store, quiescent bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	pf := &s.pre
	if len(pf.slots) > maxPrefetchSlots {
		return fmt.Errorf("%d slots; at most %d", len(pf.slots), maxPrefetchSlots)
	}
	if len(pf.want) > maxPrefetchSlots*maxPrefetch {
		return fmt.Errorf("%d ids registered; at most %d", len(pf.want), maxPrefetchSlots*maxPrefetch)
	}
	for id, w := range pf.want {
		if _, _, in := s.loadMemory(id); in {
			return fmt.Errorf("job %s registered while its record is in memory", id)
		}
		if quiescent {
			owner := false
			for _, sl := range pf.slots {
				if sl.tag == w.tag && slices.Contains(sl.owned, id) {
					owner = true
				}
			}
			if !owner {
				return fmt.Errorf("job %s registered with tag %d, of no slot's last prefetch", id, w.tag)
			}
		}
		if w.pair == nil {
			if quiescent {
				return fmt.Errorf("job %s registered, not read, with no prefetch under way", id)
			}
			continue
		}
		j, sd, err := s.read(s.db, id)
		if err != nil {
			return err
		}
		if j == nil {
			return fmt.Errorf("job %s read ahead has no record", id)
		}
		if sd != w.sd || !bytes.Equal(encodeJob(nil, j, sd), encodeJob(nil, &w.pair[0], w.sd)) {
			return fmt.Errorf("job %s read ahead as %s attempt %d token %d %q; committed: %s attempt %d token %d %q",
				id, w.pair[0].State, w.pair[0].Attempt, w.pair[0].LeaseToken, w.pair[0].Title,
				j.State, j.Attempt, j.LeaseToken, j.Title)
		}
	}
	return nil
}

// pfJob is what the test knows of a job: what its record must say.
type pfJob struct {
	title, queue string
	// claims is the times it was handed out (its lease token), errs the
	// attempts failed or released (len(Errors)), releases those released
	// (given back: Attempt is claims - releases).
	claims, errs, releases int
	// held: handed out, and no outcome asked for yet.
	held, deleted bool
}

// pfModel is the truth the claims are checked against.
type pfModel struct {
	mu   sync.Mutex
	jobs map[string]*pfJob
	ids  []string
	next int // titles
}

// enqueue enqueues n jobs in queue (scheduled an hour on when later) and
// records them; m.mu must be held.
func (m *pfModel) enqueue(ctx context.Context, s *Store, queue string, n int, later bool) error {
	jobs := make([]backend.NewJob, n)
	for i := range jobs {
		m.next++
		title := fmt.Sprintf("j%d", m.next)
		jobs[i] = backend.NewJob{Type: "test", Queue: queue, Title: title, Payload: []byte("p-" + title), Priority: rand.IntN(3)}
		if later {
			jobs[i].RunAt = t0.Add(time.Hour)
		}
	}
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: t0})
	if err != nil {
		return err
	}
	for i, e := range res.Jobs {
		m.jobs[e.ID] = &pfJob{title: jobs[i].Title, queue: queue}
		m.ids = append(m.ids, e.ID)
	}
	return nil
}

// claimed checks jobs a claim of queues handed out against the model and
// Get, and records them held.
func (m *pfModel) claimed(ctx context.Context, s *Store, queues []string, jobs []*backend.Job) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, j := range jobs {
		k := m.jobs[j.ID]
		switch {
		case k == nil:
			return fmt.Errorf("claim handed out unknown job %s", j.ID)
		case k.deleted:
			return fmt.Errorf("claim handed out deleted job %s (%s)", j.ID, k.title)
		case k.held:
			return fmt.Errorf("claim handed out job %s (%s) while it is held", j.ID, k.title)
		case !slices.Contains(queues, j.Queue) || j.Queue != k.queue:
			return fmt.Errorf("claim of %q handed out job %s of %s; it is of %s", queues, j.ID, j.Queue, k.queue)
		case j.Title != k.title || string(j.Payload) != "p-"+k.title:
			return fmt.Errorf("job %s handed out as %q payload %q; want %q", j.ID, j.Title, j.Payload, k.title)
		case j.State != backend.StateActive || j.CancelRequested:
			return fmt.Errorf("job %s (%s) handed out %s, cancel requested %v", j.ID, k.title, j.State, j.CancelRequested)
		case j.LeaseToken != int64(k.claims+1) || j.Attempt != k.claims+1-k.releases || len(j.Errors) != k.errs:
			return fmt.Errorf("job %s (%s) handed out with token %d attempt %d, %d errors; want %d, %d, %d",
				j.ID, k.title, j.LeaseToken, j.Attempt, len(j.Errors), k.claims+1, k.claims+1-k.releases, k.errs)
		}
		g, err := s.Get(ctx, backend.GetParams{ID: j.ID})
		if err != nil {
			return err
		}
		if g.State != backend.StateActive || g.LeaseToken != j.LeaseToken || g.Attempt != j.Attempt || len(g.Errors) != k.errs {
			return fmt.Errorf("job %s (%s) handed out with token %d attempt %d; Get: %s token %d attempt %d",
				j.ID, k.title, j.LeaseToken, j.Attempt, g.State, g.LeaseToken, g.Attempt)
		}
		k.claims++
		k.held = true
	}
	return nil
}

// finish ends the attempts of jobs handed out: completed, failed in
// every way, or released, at random.
func (m *pfModel) finish(ctx context.Context, s *Store, jobs []*backend.Job, now time.Time, completeOnly bool) error {
	var done []backend.CompleteItem
	var failed []backend.FailItem
	var released []backend.Lease
	m.mu.Lock()
	for _, j := range jobs {
		k := m.jobs[j.ID]
		k.held = false
		r := 0
		if !completeOnly {
			r = rand.IntN(20)
		}
		switch {
		case r < 10:
			done = append(done, backend.CompleteItem{Lease: leaseOf(j)})
		case r < 16:
			it := backend.FailItem{Lease: leaseOf(j), Message: "x"}
			switch r {
			case 13:
				it.RetryAt = now.Add(time.Hour) // retry state
			case 14:
				it.Final = true
			case 15:
				it.Cancel = true
			}
			failed = append(failed, it)
			k.errs++
		default:
			released = append(released, leaseOf(j))
			k.errs++
			k.releases++
		}
	}
	m.mu.Unlock()
	check := func(what string, res backend.BatchResult, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		for i, e := range res.Errors {
			if e != nil {
				return fmt.Errorf("%s: item %d: %w", what, i, e)
			}
		}
		return nil
	}
	if len(done) > 0 {
		res, err := s.Complete(ctx, backend.CompleteParams{Items: done, Now: now})
		if err := check("Complete", res, err); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		res, err := s.Fail(ctx, backend.FailParams{Items: failed, Now: now})
		if err := check("Fail", res, err); err != nil {
			return err
		}
	}
	if len(released) > 0 {
		res, err := s.Release(ctx, backend.ReleaseParams{Leases: released, Now: now})
		if err := check("Release", res, err); err != nil {
			return err
		}
	}
	return nil
}

// mutate changes one job at random, or enqueues some, as an operator
// would: cancel, retry, run now, delete. None of these changes what the
// model checks of a job handed out but a delete, and a job handed out
// cannot be deleted before its outcome: only enqueues (to record the
// jobs before a claim may hand them out) and deletes take m.mu.
func (m *pfModel) mutate(ctx context.Context, s *Store, queues []string) error {
	m.mu.Lock()
	if rand.IntN(8) == 0 {
		defer m.mu.Unlock()
		return m.enqueue(ctx, s, queues[rand.IntN(len(queues))], 1+rand.IntN(6), rand.IntN(3) == 0)
	}
	id := m.ids[rand.IntN(len(m.ids))]
	k := m.jobs[id]
	deleted := k.deleted
	m.mu.Unlock()
	if deleted {
		return nil
	}
	var err error
	switch rand.IntN(4) {
	case 0:
		_, err = s.Cancel(ctx, backend.CancelParams{ID: id, Now: t0})
	case 1:
		_, err = s.Retry(ctx, backend.RetryParams{ID: id, Now: t0})
	case 2:
		_, err = s.RunNow(ctx, backend.RunNowParams{ID: id, Now: t0})
	case 3:
		err = s.Delete(ctx, backend.DeleteParams{ID: id, Now: t0})
		if err == nil {
			m.mu.Lock()
			k.deleted = true
			m.mu.Unlock()
		}
	}
	var se *backend.StateError
	if errors.As(err, &se) || errors.Is(err, backend.ErrJobActive) {
		err = nil
	}
	return err
}

// TestPrefetchSlotsConcurrent runs claims of overlapping and disjoint
// sets of queues, more sets than there are slots, at once, against
// enqueues, cancels, retries, runs now and deletes, with every outcome of
// an attempt (complete, fail to retry at once or later, fail for good,
// cancel, release). Every job handed out must be its current record
// (lease token equal to the times it was handed out, attempt, errors,
// title, payload), never while it is held, and no job may be lost; the
// records read ahead are checked against the committed ones all along.
// KYU_TEST_SOAK=1 runs it for a minute instead of about a second.
func TestPrefetchSlotsConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	run := time.Second
	if os.Getenv("KYU_TEST_SOAK") != "" {
		run = time.Minute
	}
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	extra := make([]string, 10)
	for i := range extra {
		extra[i] = fmt.Sprintf("e%d", i)
	}
	all := append([]string{"a", "b", "c"}, extra...)
	m := &pfModel{jobs: make(map[string]*pfJob)}
	for _, q := range all {
		n := 100
		if q[0] == 'e' {
			n = 40
		}
		if err := m.enqueue(ctx, s, q, n, false); err != nil {
			t.Fatal(err)
		}
	}
	s = reopen(t, s, dir) // records read from Pebble

	stop := make(chan struct{})
	errc := make(chan error, 32)
	var wg sync.WaitGroup
	var claimsMu sync.Mutex
	handed := 0
	claimer := func(sets [][]string) {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			queues := sets[i%len(sets)]
			p := backend.ClaimParams{Queues: queues, Max: 1 + rand.IntN(3), Lease: time.Minute, WorkerID: "w", Now: t0}
			if rand.IntN(4) == 0 {
				p.Mode = backend.ClaimWeighted
			}
			res, err := s.Claim(ctx, p)
			if err == nil {
				err = m.claimed(ctx, s, queues, res.Jobs)
			}
			if err == nil {
				err = m.finish(ctx, s, res.Jobs, t0, false)
			}
			if err != nil {
				errc <- err
				return
			}
			claimsMu.Lock()
			handed += len(res.Jobs)
			claimsMu.Unlock()
		}
	}
	for _, set := range [][]string{{"a"}, {"b"}, {"c"}, {"a", "b"}, {"b", "a"}, {"b", "c"}, {"a", "b", "c"}} {
		wg.Add(1)
		go claimer([][]string{set})
	}
	// More sets than there are slots claim at once, so that slots are
	// dropped, some while their prefetch is under way; two claimers go
	// through sets that overlap.
	var churn [][]string
	for i, q := range extra {
		churn = append(churn, []string{q}, []string{"a", q}, []string{q, extra[(i+1)%len(extra)]})
		wg.Add(1)
		go claimer([][]string{{q}})
	}
	reversed := slices.Clone(churn)
	slices.Reverse(reversed)
	wg.Add(3)
	go claimer(churn)
	go claimer(reversed)
	// An operator changes jobs meanwhile.
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := m.mutate(ctx, s, all); err != nil {
				errc <- err
				return
			}
		}
	}()
	// The records read ahead are checked all along.
	checks := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(200 * time.Microsecond) // not to hog mu
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if err := checkPrefetchState(s, false); err != nil {
				errc <- err
				return
			}
			checks++
		}
	}()
	select {
	case err := <-errc:
		close(stop)
		wg.Wait()
		t.Fatal(err)
	case <-time.After(run):
	}
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if err := checkPrefetchState(s, true); err != nil {
		t.Fatal(err)
	}
	claimReads, concurrent := claimReadsOf(s), handed

	// Drain: every job left is handed out (and checked) and completed.
	later := t0.Add(1000 * time.Hour)
	for {
		res, err := s.Claim(ctx, backend.ClaimParams{Queues: all, Max: 50, Lease: time.Minute, WorkerID: "w", Now: later})
		if err == nil {
			err = m.claimed(ctx, s, all, res.Jobs)
		}
		if err == nil {
			err = m.finish(ctx, s, res.Jobs, later, true)
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Jobs) == 0 {
			break
		}
		handed += len(res.Jobs)
	}
	if err := checkPrefetchState(s, true); err != nil {
		t.Fatal(err)
	}
	deleted := 0
	for _, id := range m.ids {
		k := m.jobs[id]
		j, err := s.Get(ctx, backend.GetParams{ID: id})
		if k.deleted {
			deleted++
			if !errors.Is(err, backend.ErrNotFound) {
				t.Errorf("deleted job %s (%s): Get = %v, %v", id, k.title, j, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("job %s (%s) lost: %v", id, k.title, err)
			continue
		}
		if !j.State.Final() || j.LeaseToken != int64(k.claims) || j.Attempt != k.claims-k.releases || len(j.Errors) != k.errs {
			t.Errorf("job %s (%s) ends %s token %d attempt %d, %d errors; want final, %d, %d, %d",
				id, k.title, j.State, j.LeaseToken, j.Attempt, len(j.Errors), k.claims, k.claims-k.releases, k.errs)
		}
	}
	t.Logf("%d jobs (%d deleted), %d handed out, %d at once (%d of them read under mu), %d state checks",
		len(m.ids), deleted, handed, concurrent, claimReads, checks)
}

// registration returns the registration of job id, if any.
func registration(s *Store, id string) (prefetched, bool) {
	parsed, _ := parseID(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.pre.want[parsed]
	return w, ok
}

// slotTag returns the tag of the last prefetch of the slot of queues, or
// 0 if there is no such slot.
func slotTag(s *Store, queues ...string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sl := range s.pre.slots {
		if sl.holds(queues) {
			return sl.tag
		}
	}
	return 0
}

// A prefetch that read a job's record before the job was written, and
// ends while another set's prefetch, which registered the job again
// after the write, still reads, leaves the newer registration alone: the
// claim that follows must not find the record the first prefetch read.
// The prefetches are held, once done reading, in the store's filling
// hook, to run in that order: the prefetch of a reads job "first"; first
// is cancelled (its registration dropped); the prefetch of b and a
// registers it again (its stale ready entry is still in a) and reads it;
// the prefetch of a fills in, then the other one.
func TestPrefetchOtherSlotRegisteredAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	first := enqueue(t, s, t0,
		backend.NewJob{Queue: "a", Title: "first", Priority: 5, Payload: []byte("p-first")},
		backend.NewJob{Queue: "a", Title: "a0", Payload: []byte("p-a0")},
		backend.NewJob{Queue: "b", Title: "b0", Payload: []byte("p-b0")},
	)[0].ID
	s = reopen(t, s, dir) // records read from Pebble

	// A gate holds the prefetch of a set of queues (sorted, joined by
	// commas) once done reading: at is closed when it gets there, and it
	// goes on once resume is closed.
	type gate struct {
		at, resume chan struct{}
		once       sync.Once
	}
	gates := map[string]*gate{}
	for _, set := range []string{"a", "a,b"} {
		g := &gate{at: make(chan struct{}), resume: make(chan struct{})}
		gates[set] = g
		t.Cleanup(func() { g.once.Do(func() { close(g.resume) }) }) // before Close
	}
	open := func(set string) { g := gates[set]; g.once.Do(func() { close(g.resume) }) }
	s.pre.filling = func(queues []string) {
		g := gates[strings.Join(queues, ",")]
		if g == nil {
			t.Errorf("prefetch of %q: not expected", queues)
			return
		}
		close(g.at)
		<-g.resume
	}

	// The prefetch of a registers first and a0 and reads them.
	doneA, doneBA := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(doneA)
		s.prefetch([]string{"a"}, 2, nil)
	}()
	signalled(t, gates["a"].at, "the prefetch of a done reading")
	tagA := slotTag(s, "a")
	if w, ok := registration(s, first); !ok || w.tag != tagA || w.pair != nil {
		t.Fatalf("first: registration %+v, %v; want tag %d, not filled in", w, ok, tagA)
	}

	// The cancel drops the registration of first.
	if _, err := s.Cancel(ctx, backend.CancelParams{ID: first, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if w, ok := registration(s, first); ok {
		t.Fatalf("first: registered after the cancel: %+v", w)
	}

	// The prefetch of b and a registers b0 and first again, and reads
	// them.
	go func() {
		defer close(doneBA)
		s.prefetch([]string{"b", "a"}, 2, nil)
	}()
	signalled(t, gates["a,b"].at, "the prefetch of b and a done reading")
	tagBA := slotTag(s, "a", "b")
	if w, ok := registration(s, first); !ok || w.tag != tagBA || w.pair != nil {
		t.Fatalf("first: registration %+v, %v; want tag %d (not %d), not filled in", w, ok, tagBA, tagA)
	}

	// The prefetch of a ends first: it leaves first alone.
	open("a")
	signalled(t, doneA, "the prefetch of a ended")
	if w, ok := registration(s, first); !ok || w.tag != tagBA || w.pair != nil {
		t.Errorf("first: once the prefetch of a ended, registration %+v, %v; want tag %d, not filled in", w, ok, tagBA)
	}
	if err := checkPrefetchState(s, false); err != nil {
		t.Error(err)
	}
	open("a,b")
	signalled(t, doneBA, "the prefetch of b and a ended")
	s.pre.filling = nil // no prefetch runs

	seen := make(map[string]bool)
	for {
		res := claimAt(t, s, backend.ClaimParams{Queues: []string{"a", "b"}, Max: 50, Now: t0})
		if len(res.Jobs) == 0 {
			break
		}
		for _, j := range res.Jobs {
			if j.ID == first {
				t.Fatal("the cancelled job was handed out")
			}
		}
		checkClaimed(t, s, res.Jobs, seen)
	}
	if len(seen) != 2 {
		t.Fatalf("%d jobs handed out; want 2", len(seen))
	}
	if err := checkPrefetchState(s, true); err != nil {
		t.Fatal(err)
	}
}

// A slot's prefetch forgets the records its last one read that are no
// longer at the front of its queues (jobs put before them), prefetch
// after prefetch: the slot's lists of ids, which take turns, are not
// mixed up.
func TestPrefetchForgetsPassed(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	const n = 4
	var firsts []string
	for round := range 5 {
		jobs := make([]backend.NewJob, n)
		for i := range jobs {
			title := fmt.Sprintf("r%d-%d", round, i)
			jobs[i] = backend.NewJob{Queue: "a", Title: title, Priority: 10 * round, Payload: []byte("p-" + title)}
		}
		res := enqueue(t, s, t0, jobs...)
		firsts = firsts[:0]
		for _, e := range res {
			firsts = append(firsts, e.ID)
		}
		s.prefetch([]string{"a"}, n, nil)
		if err := checkPrefetchState(s, true); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		s.mu.Lock()
		held := len(s.pre.want)
		for _, id := range firsts {
			parsed, _ := parseID(id)
			if _, ok := s.pre.want[parsed]; !ok {
				held = -1
			}
		}
		s.mu.Unlock()
		if held != n {
			t.Fatalf("round %d: %d ids registered, those of the jobs put first among them: %v; want %d, true",
				round, held, held != -1, n)
		}
	}
	seen := make(map[string]bool)
	for {
		res := claimAt(t, s, backend.ClaimParams{Queues: []string{"a"}, Max: 3, Now: t0})
		if len(res.Jobs) == 0 {
			break
		}
		checkClaimed(t, s, res.Jobs, seen)
	}
	if len(seen) != 5*n {
		t.Fatalf("%d jobs handed out; want %d", len(seen), 5*n)
	}
}
