package postgres

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// waitClaimParams asks for up to max jobs of queues, now.
func waitClaimParams(max int, queues ...string) backend.ClaimParams {
	return backend.ClaimParams{Queues: queues, Max: max, Lease: time.Minute, WorkerID: "w", Now: time.Now()}
}

// waitingCount is how many claims wait in s.
func waitingCount(s *Store) int {
	s.waiting.mu.Lock()
	defer s.waiting.mu.Unlock()
	return len(s.waiting.list)
}

// awaitWaiting waits until n claims wait in s.
func awaitWaiting(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for waitingCount(s) != n {
		if time.Now().After(deadline) {
			t.Fatalf("waiting claims = %d; want %d", waitingCount(s), n)
		}
		time.Sleep(time.Millisecond)
	}
}

type waitClaimAnswer struct {
	res backend.ClaimResult
	err error
}

// claimAsync runs ClaimWait in a goroutine and hands back its answer.
func claimAsync(ctx context.Context, s *Store, p backend.ClaimParams) <-chan waitClaimAnswer {
	c := make(chan waitClaimAnswer, 1)
	go func() {
		res, err := s.ClaimWait(ctx, p)
		c <- waitClaimAnswer{res, err}
	}()
	return c
}

// answerOf waits for a ClaimWait's answer.
func answerOf(t *testing.T, c <-chan waitClaimAnswer) waitClaimAnswer {
	t.Helper()
	select {
	case a := <-c:
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("ClaimWait did not return")
		return waitClaimAnswer{}
	}
}

// enqueueJobs enqueues jobs now, failing the test on an error.
func enqueueJobs(t *testing.T, s *Store, jobs ...backend.NewJob) []backend.EnqueuedJob {
	t.Helper()
	res, err := s.Enqueue(context.Background(), backend.EnqueueParams{Jobs: jobs, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return res.Jobs
}

// rowVersion is a job's state and the id of the transaction that wrote
// its row as it is now (xmin).
func rowVersion(t *testing.T, s *Store, id string) (state string, xmin int64) {
	t.Helper()
	err := s.pool.QueryRow(context.Background(), "SELECT state, xmin::text::bigint FROM "+s.schema+".jobs WHERE id = $1", id).
		Scan(&state, &xmin)
	if err != nil {
		t.Fatal(err)
	}
	return state, xmin
}

// A claim waiting for work is filled by the enqueue of this process that
// makes a job of its queues pending, in the enqueue's transaction: the job
// is active once Enqueue returns, and its row was written by the same
// transaction as that of a job of the same call left pending (the claim
// asked for one). That holds whichever way the enqueue goes: one statement
// (pipelined with the claim), a transaction for a unique key, and a
// transaction for a claim of several queues, whose first is empty.
func TestClaimWaitFilledInEnqueueCommit(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	cases := []struct {
		name   string
		queues []string
		job    backend.NewJob
	}{
		{"pipelined", []string{"a"}, backend.NewJob{Queue: "a", Type: "t"}},
		{"unique key", []string{"b"}, backend.NewJob{Queue: "b", Type: "t", UniqueKey: "k"}},
		{"queues", []string{"c0", "c"}, backend.NewJob{Queue: "c", Type: "t"}},
	}
	for _, c := range cases {
		answer := claimAsync(context.Background(), s, waitClaimParams(1, c.queues...))
		awaitWaiting(t, s, 1)
		second := c.job
		second.UniqueKey = ""
		jobs := enqueueJobs(t, s, c.job, second)
		claimedState, claimedXmin := rowVersion(t, s, jobs[0].ID)
		leftState, leftXmin := rowVersion(t, s, jobs[1].ID)
		if claimedState != "active" || leftState != "pending" {
			t.Fatalf("%s: after Enqueue the jobs are %s and %s; want active and pending", c.name, claimedState, leftState)
		}
		if claimedXmin != leftXmin {
			t.Fatalf("%s: claimed row written by transaction %d, enqueued row by %d; want one transaction",
				c.name, claimedXmin, leftXmin)
		}
		a := answerOf(t, answer)
		if a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != jobs[0].ID || a.res.Jobs[0].WorkerID != "w" {
			t.Fatalf("%s: ClaimWait = %+v, %v; want the first job", c.name, a.res.Jobs, a.err)
		}
		if waitingCount(s) != 0 {
			t.Fatalf("%s: a filled claim still waits", c.name)
		}
	}
}

// Coalesced enqueues fill the claims waiting, oldest first, as many as
// their jobs need, in the group's transaction.
func TestClaimWaitFilledByGroup(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := context.Background()
	first := claimAsync(ctx, s, waitClaimParams(1, "q"))
	awaitWaiting(t, s, 1)
	second := claimAsync(ctx, s, waitClaimParams(1, "q"))
	awaitWaiting(t, s, 2)
	holdLine(t, s)
	a := joinLine(t, s, ctx, backend.EnqueueParams{Jobs: []backend.NewJob{{Queue: "q", Type: "t"}}, Now: time.Now()})
	b := joinLine(t, s, ctx, backend.EnqueueParams{Jobs: []backend.NewJob{{Queue: "q", Type: "t"}}, Now: time.Now()})
	releaseLine(s)
	ra, err := a.wait(t)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.wait(t)
	if err != nil {
		t.Fatal(err)
	}
	_, xa := rowVersion(t, s, ra.Jobs[0].ID)
	_, xb := rowVersion(t, s, rb.Jobs[0].ID)
	if xa != xb {
		t.Fatalf("the group's jobs were written (claimed) by transactions %d and %d; want one", xa, xb)
	}
	got := map[string]bool{}
	for _, c := range []<-chan waitClaimAnswer{first, second} {
		ans := answerOf(t, c)
		if ans.err != nil || len(ans.res.Jobs) != 1 {
			t.Fatalf("ClaimWait = %+v, %v; want one job", ans.res.Jobs, ans.err)
		}
		got[ans.res.Jobs[0].ID] = true
	}
	if !got[ra.Jobs[0].ID] || !got[rb.Jobs[0].ID] {
		t.Fatalf("claims got %v; want both jobs", got)
	}
}

// A waiting claim is filled as a Claim would be: nothing from a paused
// queue (it waits on), the highest priority first, other jobs of the
// queue than the new one included.
func TestClaimWaitFillOrder(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := context.Background()
	paused, resumed := true, false
	if _, err := s.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: "p", Paused: &paused, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	answer := claimAsync(ctx, s, waitClaimParams(2, "p"))
	awaitWaiting(t, s, 1)
	low := enqueueJobs(t, s, backend.NewJob{Queue: "p", Type: "t"})[0].ID
	// The enqueue took the claim, found the queue paused, and the claim
	// waits again.
	awaitWaiting(t, s, 1)
	if st, _ := rowVersion(t, s, low); st != "pending" {
		t.Fatalf("job of a paused queue is %s; want pending", st)
	}
	if _, err := s.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: "p", Paused: &resumed, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	a := answerOf(t, answer)
	if a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != low {
		t.Fatalf("ClaimWait after resume = %+v, %v; want the job", a.res.Jobs, a.err)
	}

	// Two jobs of a paused queue, which resumes without a wake-up; then a
	// job of low priority is enqueued: the claim for two takes the other
	// two, of higher priority.
	if _, err := s.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: "r", Paused: &paused, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	high := enqueueJobs(t, s, backend.NewJob{Queue: "r", Type: "t", Priority: 7}, backend.NewJob{Queue: "r", Type: "t", Priority: 9})
	answer = claimAsync(ctx, s, waitClaimParams(2, "r"))
	awaitWaiting(t, s, 1)
	if _, err := s.pool.Exec(ctx, "UPDATE "+s.schema+".queues SET paused = false WHERE name = 'r'"); err != nil {
		t.Fatal(err)
	}
	low = enqueueJobs(t, s, backend.NewJob{Queue: "r", Type: "t", Priority: 1})[0].ID
	if st, _ := rowVersion(t, s, low); st != "pending" {
		t.Fatalf("job of low priority is %s; want pending", st)
	}
	a = answerOf(t, answer)
	if a.err != nil || len(a.res.Jobs) != 2 || a.res.Jobs[0].ID != high[1].ID || a.res.Jobs[1].ID != high[0].ID {
		t.Fatalf("ClaimWait = %+v, %v; want the jobs of priority 9 and 7", a.res.Jobs, a.err)
	}
}

// A waiting claim that gives up as an enqueue fills it claims nothing it
// keeps: every job ends either returned by ClaimWait or pending, never
// active with no one to run it.
func TestClaimWaitCancelRace(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	for i := range 40 {
		ctx, cancel := context.WithCancel(context.Background())
		q := fmt.Sprintf("q%d", i)
		answer := claimAsync(ctx, s, waitClaimParams(1, q))
		awaitWaiting(t, s, 1)
		var wg sync.WaitGroup
		var id string
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i%8) * 100 * time.Microsecond)
			cancel()
		}()
		id = enqueueJobs(t, s, backend.NewJob{Queue: q, Type: "t"})[0].ID
		wg.Wait()
		a := answerOf(t, answer)
		state, _ := rowVersion(t, s, id)
		switch {
		case a.err == nil && len(a.res.Jobs) == 1 && a.res.Jobs[0].ID == id:
			if state != "active" {
				t.Fatalf("round %d: claimed job is %s", i, state)
			}
			if _, err := s.Release(context.Background(), backend.ReleaseParams{
				Leases: []backend.Lease{{JobID: id, Token: a.res.Jobs[0].LeaseToken}}, Now: time.Now()}); err != nil {
				t.Fatal(err)
			}
		case errors.Is(a.err, context.Canceled):
			if state != "pending" {
				t.Fatalf("round %d: ClaimWait gave up and the job is %s; want pending", i, state)
			}
		default:
			t.Fatalf("round %d: ClaimWait = %+v, %v", i, a.res.Jobs, a.err)
		}
		if waitingCount(s) != 0 {
			t.Fatalf("round %d: %d claims still wait", i, waitingCount(s))
		}
	}
}

// An enqueue that fails leaves the claim waiting, with its usual error;
// one whose claim fails is written without it.
func TestClaimWaitFailedEnqueue(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := context.Background()
	// Inserting a job of type "boom" fails, and so does claiming one of
	// type "claimboom".
	_, err := s.pool.Exec(ctx, fmt.Sprintf(`
CREATE FUNCTION %[1]s.boom() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.type = 'boom' OR (NEW.type = 'claimboom' AND NEW.state = 'active') THEN
		RAISE EXCEPTION 'boom';
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER boom BEFORE INSERT OR UPDATE ON %[1]s.jobs FOR EACH ROW EXECUTE FUNCTION %[1]s.boom();`, s.schema))
	if err != nil {
		t.Fatal(err)
	}
	answer := claimAsync(ctx, s, waitClaimParams(1, "q"))
	awaitWaiting(t, s, 1)
	if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: []backend.NewJob{{Queue: "q", Type: "boom"}}, Now: time.Now()}); err == nil {
		t.Fatal("Enqueue of a job whose insert fails succeeded")
	}
	awaitWaiting(t, s, 1)
	if n := countJobs(t, s); n != 0 {
		t.Fatalf("%d jobs after a failed enqueue", n)
	}

	// The claim fails in the enqueue's transaction: the enqueue is written
	// alone; the claim claims again itself, and fails as Claim does.
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: []backend.NewJob{{Queue: "q", Type: "claimboom"}}, Now: time.Now()})
	if err != nil {
		t.Fatalf("Enqueue failed for its claim: %v", err)
	}
	a := answerOf(t, answer)
	if a.err == nil {
		t.Fatalf("ClaimWait = %+v; want the claim's error", a.res.Jobs)
	}
	if st, _ := rowVersion(t, s, res.Jobs[0].ID); st != "pending" {
		t.Fatalf("job is %s; want pending", st)
	}
}

// Close ends a waiting claim with ErrClosed.
func TestClaimWaitClose(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	answer := claimAsync(context.Background(), s, waitClaimParams(1, "q"))
	awaitWaiting(t, s, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if a := answerOf(t, answer); !errors.Is(a.err, backend.ErrClosed) {
		t.Fatalf("ClaimWait after Close = %+v, %v; want ErrClosed", a.res.Jobs, a.err)
	}
	if _, err := s.ClaimWait(context.Background(), waitClaimParams(1, "q")); !errors.Is(err, backend.ErrClosed) {
		t.Fatalf("ClaimWait on a closed store = %v; want ErrClosed", err)
	}
}

// A claim that finds jobs returns them at once; one whose ctx ends while
// nothing comes returns ctx's error.
func TestClaimWaitImmediateAndTimeout(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	id := enqueueJobs(t, s, backend.NewJob{Queue: "q", Type: "t"})[0].ID
	res, err := s.ClaimWait(context.Background(), waitClaimParams(5, "q"))
	if err != nil || len(res.Jobs) != 1 || res.Jobs[0].ID != id {
		t.Fatalf("ClaimWait = %+v, %v; want the pending job", res.Jobs, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.ClaimWait(ctx, waitClaimParams(5, "q")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ClaimWait with nothing to claim = %v; want DeadlineExceeded", err)
	}
	if waitingCount(s) != 0 {
		t.Fatal("a claim that gave up still waits")
	}
}

// An enqueue whose jobs a waiting claim all took wakes no subscriber of
// their queue: there is nothing left to claim. One that leaves a job
// pending does, at once.
func TestClaimWaitFilledWakesNoOne(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := context.Background()
	sub, err := s.Subscribe(ctx, backend.SubscribeParams{Queues: []string{"q"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	answer := claimAsync(ctx, s, waitClaimParams(1, "q"))
	awaitWaiting(t, s, 1)
	enqueueJobs(t, s, backend.NewJob{Queue: "q", Type: "t"})
	select {
	case <-sub.C:
		t.Fatal("an enqueue whose job a waiting claim took woke the queue's subscriber")
	default:
	}
	if a := answerOf(t, answer); a.err != nil || len(a.res.Jobs) != 1 {
		t.Fatalf("ClaimWait = %+v, %v; want the job", a.res.Jobs, a.err)
	}

	answer = claimAsync(ctx, s, waitClaimParams(1, "q"))
	awaitWaiting(t, s, 1)
	enqueueJobs(t, s, backend.NewJob{Queue: "q", Type: "t"}, backend.NewJob{Queue: "q", Type: "t"})
	select {
	case <-sub.C:
	default:
		t.Fatal("an enqueue that left a job pending did not wake the queue's subscriber")
	}
	if a := answerOf(t, answer); a.err != nil || len(a.res.Jobs) != 1 {
		t.Fatalf("ClaimWait = %+v, %v; want a job", a.res.Jobs, a.err)
	}
}

// An enqueue large enough for COPY fills a waiting claim in its
// transaction too.
func TestClaimWaitFilledByCopy(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	answer := claimAsync(context.Background(), s, waitClaimParams(5, "q"))
	awaitWaiting(t, s, 1)
	jobs := make([]backend.NewJob, copyMinJobs+5)
	for i := range jobs {
		jobs[i] = backend.NewJob{Queue: "q", Type: "t"}
	}
	res := enqueueJobs(t, s, jobs...)
	a := answerOf(t, answer)
	if a.err != nil || len(a.res.Jobs) != 5 {
		t.Fatalf("ClaimWait = %d jobs, %v; want 5", len(a.res.Jobs), a.err)
	}
	claimed := map[string]bool{}
	for _, j := range a.res.Jobs {
		claimed[j.ID] = true
	}
	var xmins []int64
	active := 0
	for _, r := range res {
		st, x := rowVersion(t, s, r.ID)
		if st == "active" {
			active++
			if !claimed[r.ID] {
				t.Fatalf("job %s is active but not the claim's", r.ID)
			}
		}
		xmins = append(xmins, x)
	}
	if active != 5 {
		t.Fatalf("%d jobs active; want 5", active)
	}
	for _, x := range xmins {
		if x != xmins[0] {
			t.Fatalf("rows written by transactions %d and %d; want one", xmins[0], x)
		}
	}
}

// tupleCounts is how many rows of s's jobs table the server has counted
// as inserted and as updated (its cumulative statistics, which each
// connection reports within about a second of its transactions).
func tupleCounts(t *testing.T, s *Store) (inserted, updated int64) {
	t.Helper()
	err := s.pool.QueryRow(context.Background(), `SELECT n_tup_ins, n_tup_upd FROM pg_stat_user_tables
		WHERE schemaname = $1 AND relname = 'jobs'`, s.opts.Schema).Scan(&inserted, &updated)
	if err != nil {
		t.Fatal(err)
	}
	return inserted, updated
}

// An idle worker's job is written once: the enqueue that fills a claim
// waiting on empty queues inserts the job active, leased to the claim,
// in one statement, rather than inserting it pending and then locking
// and updating it (two statements or more, and two row versions). That
// holds for a claim of one queue and for one of several, the job's the
// last. The lease it gets is the one a claim gives: its token completes
// the job.
func TestClaimWaitFillInsertsActive(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := context.Background()
	cases := []struct {
		name   string
		queues []string
	}{
		{"one queue", []string{"q"}},
		{"queues", []string{"r0", "r1", "r"}},
	}
	var leases []backend.Lease // completed at the end: a completion is an update
	for i, c := range cases {
		queue := c.queues[len(c.queues)-1]
		answer := claimAsync(ctx, s, waitClaimParams(2, c.queues...))
		awaitWaiting(t, s, 1)
		id := enqueueJobs(t, s, backend.NewJob{Queue: queue, Type: "t"})[0].ID
		a := answerOf(t, answer)
		if a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != id {
			t.Fatalf("%s: ClaimWait = %+v, %v; want the job", c.name, a.res.Jobs, a.err)
		}
		j := a.res.Jobs[0]
		if j.State != backend.StateActive || j.Attempt != 1 || j.LeaseToken != 1 || j.WorkerID != "w" ||
			j.StartedAt.IsZero() || !j.LeaseExpiresAt.After(j.StartedAt) {
			t.Fatalf("%s: claimed job = %+v; want active, attempt 1, token 1, worker w, leased from its start", c.name, j)
		}
		want := int64(i + 1)
		deadline := time.Now().Add(20 * time.Second)
		ins, upd := tupleCounts(t, s)
		for ins < want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the server did not count the job's insert", c.name)
			}
			time.Sleep(10 * time.Millisecond)
			ins, upd = tupleCounts(t, s)
		}
		if ins != want || upd != 0 {
			t.Fatalf("%s: %d rows inserted and %d updated; want %d and 0", c.name, ins, upd, want)
		}
		leases = append(leases, backend.Lease{JobID: id, Token: j.LeaseToken})
	}
	for _, l := range leases {
		if _, err := s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: l}}, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if st, _ := rowVersion(t, s, l.JobID); st != "completed" {
			t.Fatalf("job is %s after Complete with its lease; want completed", st)
		}
	}
}

// The job a claim filled in its job's insert gets is built from the
// values the insert wrote, not read back (claimedOnInsert): it is the job
// as its row reads, field for field, whatever the job carries (times with
// nanoseconds in another zone, tags, metadata, a deadline, an absent or
// empty payload, empty lists).
func TestClaimedOnInsertMatchesRow(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := context.Background()
	zone := time.FixedZone("x", 3600+1800)
	cases := []backend.NewJob{
		{Type: "t"},
		{Type: "t", Payload: []byte{}, Tags: []string{}, Metadata: map[string]string{}},
		{Type: "t2", Payload: []byte(`{"a":1}`), Title: "title", Priority: 7, MaxAttempts: 3,
			Timeout: 1500 * time.Millisecond, Deadline: time.Now().Add(time.Hour + 123*time.Nanosecond).In(zone),
			Tags: []string{"x", "y"}, Metadata: map[string]string{"k": "v"}, Retention: backend.RetainForever,
			RunAt: time.Now().Add(-time.Minute + 789*time.Nanosecond).In(zone)},
	}
	for i, nj := range cases {
		nj.Queue = "q"
		p := waitClaimParams(1, "q")
		p.Now = time.Now().In(zone)
		answer := claimAsync(ctx, s, p)
		awaitWaiting(t, s, 1)
		res, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: []backend.NewJob{nj}, Now: time.Now().In(zone)})
		if err != nil {
			t.Fatal(err)
		}
		a := answerOf(t, answer)
		if a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != res.Jobs[0].ID {
			t.Fatalf("case %d: ClaimWait = %+v, %v; want the job", i, a.res.Jobs, a.err)
		}
		stored, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+cols("", false)+` FROM `+s.schema+`.jobs WHERE id = $1`, res.Jobs[0].ID))
		if err != nil {
			t.Fatal(err)
		}
		if got := a.res.Jobs[0]; !reflect.DeepEqual(got, stored) {
			t.Errorf("case %d: claimed job\n%+v\nthe row reads\n%+v", i, got, stored)
		}
	}
}
