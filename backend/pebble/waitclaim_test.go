package pebble

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// waitClaimParams asks for up to max jobs of queues.
func waitClaimParams(max int, queues ...string) backend.ClaimParams {
	if len(queues) == 0 {
		queues = []string{backend.DefaultQueue}
	}
	return backend.ClaimParams{Queues: queues, Max: max, Lease: time.Minute, WorkerID: "w", Now: t0}
}

// waitingCount is how many claims wait in s.
func waitingCount(s *Store) int {
	s.mu.Lock()
	defer s.mu.Unlock()
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

// claimAsync runs ClaimWait in a goroutine and hands back its answer.
func claimAsync(ctx context.Context, s *Store, p backend.ClaimParams) <-chan waitClaimAnswer {
	c := make(chan waitClaimAnswer, 1)
	go func() {
		res, err := s.ClaimWait(ctx, p)
		c <- waitClaimAnswer{res, err}
	}()
	return c
}

type waitClaimAnswer struct {
	res backend.ClaimResult
	err error
}

// A claim waiting for work is filled by the enqueue of a job, with the
// job's enqueue and its claim written in one commit.
func TestClaimWaitFilledInEnqueueCommit(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	answer := claimAsync(context.Background(), s, waitClaimParams(5))
	awaitWaiting(t, s, 1)
	s.mu.Lock()
	before := s.commits
	s.mu.Unlock()
	id := enqueue(t, s, t0, backend.NewJob{Payload: []byte("p")})[0].ID
	a := <-answer
	if a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != id || string(a.res.Jobs[0].Payload) != "p" {
		t.Fatalf("ClaimWait = %+v, %v; want the enqueued job with its payload", a.res, a.err)
	}
	s.mu.Lock()
	commits := s.commits - before
	s.mu.Unlock()
	if commits != 1 {
		t.Fatalf("enqueue and claim took %d commits; want 1", commits)
	}
	if j := get(t, s, id); j.State != backend.StateActive || j.Attempt != 1 || j.WorkerID != "w" {
		t.Fatalf("job after the fill = %+v; want active, attempt 1, worker w", j)
	}
	if waitingCount(s) != 0 {
		t.Fatal("a filled claim is still waiting")
	}
}

// A waiting claim takes the jobs it is filled with in claim order: its
// queues in order, then priority, run-at and id; and it leaves jobs of
// other queues alone. Here a paused queue's jobs, enqueued at different
// times, fill it when the queue resumes.
func TestClaimWaitOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, t.TempDir(), Options{})
	paused, resumed := true, false
	for _, q := range []string{"a", "b"} {
		if _, err := s.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: q, Paused: &paused, Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	late := enqueue(t, s, t0.Add(2*time.Second), backend.NewJob{Queue: "a"})[0].ID
	early := enqueue(t, s, t0.Add(time.Second), backend.NewJob{Queue: "a"}, backend.NewJob{Queue: "a"})
	high := enqueue(t, s, t0.Add(3*time.Second), backend.NewJob{Queue: "a", Priority: 5})[0].ID
	other := enqueue(t, s, t0, backend.NewJob{Queue: "other", Priority: 9})[0].ID
	bJob := enqueue(t, s, t0, backend.NewJob{Queue: "b", Priority: 9})[0].ID

	answer := claimAsync(ctx, s, waitClaimParams(4, "a", "b"))
	awaitWaiting(t, s, 1)
	if _, err := s.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: "b", Paused: &resumed, Now: t0}); err != nil {
		t.Fatal(err)
	}
	a := <-answer
	if a.err != nil {
		t.Fatal(a.err)
	}
	if len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != bJob {
		t.Fatalf("claim filled as b resumed = %v; want b's job", a.res.Jobs)
	}

	answer = claimAsync(ctx, s, waitClaimParams(4, "a", "b"))
	awaitWaiting(t, s, 1)
	if _, err := s.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: "a", Paused: &resumed, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if a = <-answer; a.err != nil {
		t.Fatal(a.err)
	}
	var got []string
	for _, j := range a.res.Jobs {
		got = append(got, j.ID)
	}
	want := []string{high, early[0].ID, early[1].ID, late}
	if !slices.Equal(got, want) {
		t.Fatalf("claim = %v; want %v (priority, run-at, id)", got, want)
	}
	if j := get(t, s, other); j.State != backend.StatePending {
		t.Fatalf("job of another queue is %s; want pending", j.State)
	}
}

// A claim that gives up before it is filled claims nothing; one filled
// before it gives up returns its jobs, even when their commit ends after.
func TestClaimWaitCancel(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	answer := claimAsync(ctx, s, waitClaimParams(1))
	awaitWaiting(t, s, 1)
	cancel()
	if a := <-answer; !errors.Is(a.err, context.Canceled) || len(a.res.Jobs) != 0 {
		t.Fatalf("cancelled ClaimWait = %+v, %v; want context.Canceled", a.res, a.err)
	}
	if waitingCount(s) != 0 {
		t.Fatal("a cancelled claim is still waiting")
	}
	id := enqueue(t, s, t0, backend.NewJob{})[0].ID
	if j := get(t, s, id); j.State != backend.StatePending {
		t.Fatalf("job after a cancelled claim is %s; want pending", j.State)
	}

	// Cancelled as a job arrives: either the claim has the job or the
	// job is pending again, never both, never neither.
	for i := range 50 {
		ctx, cancel := context.WithCancel(context.Background())
		answer := claimAsync(ctx, s, waitClaimParams(1, "race"))
		awaitWaiting(t, s, 1)
		go cancel()
		id := enqueue(t, s, t0, backend.NewJob{Queue: "race"})[0].ID
		a := <-answer
		j := get(t, s, id)
		switch {
		case a.err == nil && len(a.res.Jobs) == 1 && a.res.Jobs[0].ID == id && j.State == backend.StateActive:
			if _, err := s.Complete(context.Background(), backend.CompleteParams{Items: []backend.CompleteItem{{Lease: leaseOf(a.res.Jobs[0])}}, Now: t0}); err != nil {
				t.Fatal(err)
			}
		case errors.Is(a.err, context.Canceled) && j.State == backend.StatePending:
			if got := claim(t, s, t0, 1, "race"); len(got) != 1 {
				t.Fatalf("round %d: released job not claimable", i)
			}
		default:
			t.Fatalf("round %d: ClaimWait = %+v, %v with the job %s; want it claimed or pending", i, a.res, a.err, j.State)
		}
	}
}

// A claim filled before its ctx ends keeps its jobs though ctx ends
// while their commit is under way: it is handed them once they are
// durable, with no error, and the job is active, claimed once.
func TestClaimWaitFilledThenCancelled(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	answer := claimAsync(ctx, s, waitClaimParams(1))
	awaitWaiting(t, s, 1)
	enqueued := make(chan string, 1)
	go func() {
		res, err := s.Enqueue(context.Background(), backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "t"}}, Now: t0})
		if err != nil {
			t.Error(err)
			enqueued <- ""
			return
		}
		enqueued <- res.Jobs[0].ID
	}()
	// Once the claim is filled (it leaves the list in the enqueue's
	// section), hold mu, under which the committer hands the fill over
	// after the sync, while ctx ends.
	for deadline := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
		s.mu.Lock()
		if len(s.waiting.list) == 0 {
			break
		}
		s.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("the claim was not filled")
		}
	}
	cancel()
	s.mu.Unlock()
	a := <-answer
	id := <-enqueued
	if a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != id {
		t.Fatalf("ClaimWait filled, then cancelled = %+v, %v; want job %s", a.res, a.err, id)
	}
	if j := get(t, s, id); j.State != backend.StateActive || j.Attempt != 1 {
		t.Fatalf("job = %s, attempt %d; want active, attempt 1", j.State, j.Attempt)
	}
}

// Close ends the waiting claims with ErrClosed.
func TestClaimWaitClose(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	answer := claimAsync(context.Background(), s, waitClaimParams(1))
	awaitWaiting(t, s, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if a := <-answer; !errors.Is(a.err, backend.ErrClosed) {
		t.Fatalf("ClaimWait across Close = %v; want ErrClosed", a.err)
	}
}

// Many producers and waiting claimers: every job is claimed exactly once.
func TestClaimWaitExactlyOnce(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	const producers, perProducer, claimers = 4, 100, 6
	total := producers * perProducer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu      sync.Mutex
		seen    = make(map[string]int)
		claimed atomic.Int64
		wg      sync.WaitGroup
		errs    = make(chan error, claimers+producers)
	)
	for c := range claimers {
		wg.Go(func() {
			for claimed.Load() < int64(total) {
				p := waitClaimParams(1+c%3, "q1", "q2")
				var res backend.ClaimResult
				var err error
				if c%3 == 2 {
					res, err = s.Claim(ctx, p) // plain claims compete too
				} else {
					res, err = s.ClaimWait(ctx, p)
				}
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, j := range res.Jobs {
					seen[j.ID]++
				}
				mu.Unlock()
				if claimed.Add(int64(len(res.Jobs))) >= int64(total) {
					cancel()
				}
				if len(res.Jobs) == 0 {
					time.Sleep(time.Millisecond) // a plain claimer polls
				}
			}
		})
	}
	var ids sync.Map
	var pw sync.WaitGroup
	for p := range producers {
		pw.Go(func() {
			for i := range perProducer {
				q := []string{"q1", "q2"}[i%2]
				res, err := s.Enqueue(context.Background(), backend.EnqueueParams{
					Jobs: []backend.NewJob{{Type: "t", Queue: q, Title: fmt.Sprint(p, i)}}, Now: t0,
				})
				if err != nil {
					errs <- err
					return
				}
				ids.Store(res.Jobs[0].ID, true)
			}
		})
	}
	pw.Wait()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(30 * time.Second):
		t.Fatalf("claimed %d of %d jobs", claimed.Load(), total)
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	n := 0
	ids.Range(func(k, _ any) bool {
		n++
		id := k.(string)
		if seen[id] != 1 {
			t.Errorf("job %s claimed %d times", id, seen[id])
		}
		if j := get(t, s, id); j.State != backend.StateActive || j.Attempt != 1 {
			t.Errorf("job %s is %s, attempt %d; want active, attempt 1", id, j.State, j.Attempt)
		}
		return true
	})
	if n != total || len(seen) != total {
		t.Fatalf("enqueued %d, claimed %d distinct; want %d", n, len(seen), total)
	}
}

// A claim filled by the enqueue of its jobs hands over their payloads as
// the enqueue gave them (taken from the enqueue, not read back), in copies
// of their own: the enqueuer may reuse its buffers once Enqueue returns.
func TestClaimWaitFilledPayloads(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	answer := claimAsync(context.Background(), s, waitClaimParams(5))
	awaitWaiting(t, s, 1)
	buf := []byte("first")
	res, err := s.Enqueue(context.Background(), backend.EnqueueParams{Now: t0, Jobs: []backend.NewJob{
		{Type: "t", Payload: buf},
		{Type: "t", Payload: []byte{}},
		{Type: "t"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXX")
	a := <-answer
	if a.err != nil || len(a.res.Jobs) != 3 {
		t.Fatalf("ClaimWait = %+v, %v; want the 3 jobs", a.res, a.err)
	}
	want := map[string][]byte{res.Jobs[0].ID: []byte("first"), res.Jobs[1].ID: {}, res.Jobs[2].ID: nil}
	for _, j := range a.res.Jobs {
		w := want[j.ID]
		if string(j.Payload) != string(w) || (j.Payload == nil) != (w == nil) {
			t.Errorf("job %s: payload %q (nil %v); want %q (nil %v)", j.ID, j.Payload, j.Payload == nil, w, w == nil)
		}
	}
	s.mu.Lock()
	kept := len(s.waiting.payloads)
	s.mu.Unlock()
	if kept != 0 {
		t.Errorf("%d payloads kept after the section; want none", kept)
	}
	// What a filled claim handed over is what the store holds.
	for _, id := range []string{res.Jobs[0].ID, res.Jobs[1].ID} {
		if j := get(t, s, id); string(j.Payload) != string(want[id]) {
			t.Errorf("Get(%s).Payload = %q; want %q", id, j.Payload, want[id])
		}
	}
}

// subscriptionSignalled reports whether sub's channel holds a signal, once the
// committer has sent the signals of every group durable so far (it sends
// them under mu).
func subscriptionSignalled(s *Store, sub *backend.Subscription) bool {
	func() {
		s.mu.Lock()
		defer s.mu.Unlock()
	}()
	select {
	case <-sub.C:
		return true
	default:
		return false
	}
}

// A job that a waiting claim takes in its enqueue's commit wakes no
// subscriber of its queue (whose claim would find nothing); a job left
// pending does.
func TestClaimWaitFilledJobWakesNobody(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	sub, err := s.Subscribe(context.Background(), backend.SubscribeParams{Queues: []string{backend.DefaultQueue}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	answer := claimAsync(context.Background(), s, waitClaimParams(1))
	awaitWaiting(t, s, 1)
	id := enqueue(t, s, t0, backend.NewJob{})[0].ID
	if a := <-answer; a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != id {
		t.Fatalf("ClaimWait = %+v, %v; want the enqueued job", a.res, a.err)
	}
	if subscriptionSignalled(s, sub) {
		t.Fatal("a job taken by a waiting claim signalled its queue")
	}

	// Two jobs for a claim of one: the one left pending signals.
	answer = claimAsync(context.Background(), s, waitClaimParams(1))
	awaitWaiting(t, s, 1)
	enqueue(t, s, t0, backend.NewJob{}, backend.NewJob{})
	if a := <-answer; a.err != nil || len(a.res.Jobs) != 1 {
		t.Fatalf("ClaimWait = %+v, %v; want one job", a.res, a.err)
	}
	if !subscriptionSignalled(s, sub) {
		t.Fatal("a job left pending did not signal its queue")
	}
	// No claim waits: the job signals.
	enqueue(t, s, t0, backend.NewJob{})
	if !subscriptionSignalled(s, sub) {
		t.Fatal("a job enqueued while no claim waits did not signal its queue")
	}
}

// An enqueue that arrives while the store is idle commits its group
// itself, without handing it to the committer, and a claim waiting for
// its job is handed the job from that commit, once it is durable.
func TestEnqueueAloneCommitsItself(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	counts := func() (commits, own uint64) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.commits, s.ownCommits
	}
	commits0, own0 := counts()
	first := enqueue(t, s, t0, backend.NewJob{Payload: []byte("a")})[0].ID
	if commits, own := counts(); commits-commits0 != 1 || own-own0 != 1 {
		t.Fatalf("a lone enqueue made %d commits, %d of them itself; want 1, by itself", commits-commits0, own-own0)
	}
	if j := get(t, s, first); j.State != backend.StatePending {
		t.Fatalf("job after its enqueue = %+v; want pending", j)
	}

	answer := claimAsync(context.Background(), s, waitClaimParams(1))
	// The waiting claim takes the pending job first; the next enqueue
	// fills the one after.
	a := <-answer
	if a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != first {
		t.Fatalf("ClaimWait = %+v, %v; want the pending job", a.res, a.err)
	}
	answer = claimAsync(context.Background(), s, waitClaimParams(1))
	awaitWaiting(t, s, 1)
	commits0, own0 = counts()
	id := enqueue(t, s, t0, backend.NewJob{Payload: []byte("b")})[0].ID
	a = <-answer
	if a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != id || string(a.res.Jobs[0].Payload) != "b" {
		t.Fatalf("ClaimWait = %+v, %v; want the enqueued job with its payload", a.res, a.err)
	}
	if commits, own := counts(); commits-commits0 != 1 || own-own0 != 1 {
		t.Fatalf("enqueue and fill made %d commits, %d of them by the enqueue; want 1, by the enqueue", commits-commits0, own-own0)
	}
	if j := get(t, s, id); j.State != backend.StateActive || j.WorkerID != "w" {
		t.Fatalf("job after the fill = %+v; want active for worker w", j)
	}
}
