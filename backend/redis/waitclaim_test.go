package redis

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// waitClaimParams asks for up to max jobs of queue.
func waitClaimParams(max int, queue string) backend.ClaimParams {
	return backend.ClaimParams{Queues: []string{queue}, Max: max, Lease: time.Minute, WorkerID: "w", Now: time.Now()}
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

// awaitWaiting waits until n wake-up subscriptions of queue exist in s,
// besides those kept for the next waiting claim (keptWaits): a waiting
// claim has one while it waits.
func awaitWaiting(t *testing.T, s *Store, queue string, n int) {
	t.Helper()
	count := func() int {
		s.kept.mu.Lock()
		kept := map[*waiter]bool{}
		for _, kw := range s.kept.subs {
			kept[kw.w] = true
		}
		s.kept.mu.Unlock()
		s.notify.mu.Lock()
		defer s.notify.mu.Unlock()
		k := 0
		for w := range s.notify.subs {
			if slices.Contains(w.queues, queue) && !kept[w] {
				k++
			}
		}
		return k
	}
	deadline := time.Now().Add(10 * time.Second)
	for count() != n {
		if time.Now().After(deadline) {
			t.Fatalf("waiting claims on %s = %d; want %d", queue, count(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func enqueueOneJob(t *testing.T, s *Store, queue string) string {
	t.Helper()
	res, err := s.Enqueue(context.Background(), backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "t", Queue: queue}}, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return res.Jobs[0].ID
}

func jobState(t *testing.T, s *Store, id string) backend.State {
	t.Helper()
	j, err := s.Get(context.Background(), backend.GetParams{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return j.State
}

// A waiting claim takes a pending job at once, and otherwise the job
// that becomes pending while it waits, leased from when it took it.
func TestClaimWait(t *testing.T) {
	s := openTest(t, "")
	ctx := context.Background()
	first := enqueueOneJob(t, s, "q")
	res, err := s.ClaimWait(ctx, waitClaimParams(5, "q"))
	if err != nil || len(res.Jobs) != 1 || res.Jobs[0].ID != first {
		t.Fatalf("ClaimWait with a job pending = %+v, %v; want job %s", res, err, first)
	}

	answer := claimAsync(ctx, s, waitClaimParams(5, "q"))
	awaitWaiting(t, s, "q", 1)
	select {
	case a := <-answer:
		t.Fatalf("ClaimWait on an empty queue returned %+v, %v", a.res, a.err)
	default:
	}
	enqueueOneJob(t, s, "other")
	time.Sleep(20 * time.Millisecond) // the claim waits that long at least
	filled := time.Now().Truncate(time.Millisecond)
	id := enqueueOneJob(t, s, "q")
	a := <-answer
	if a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != id {
		t.Fatalf("ClaimWait = %+v, %v; want job %s", a.res, a.err, id)
	}
	if st := jobState(t, s, id); st != backend.StateActive {
		t.Fatalf("claimed job is %s", st)
	}
	if exp := a.res.Jobs[0].LeaseExpiresAt; exp.Before(filled.Add(time.Minute)) {
		t.Fatalf("lease expires at %v; want a minute from the fill (%v) or later", exp, filled)
	}
	awaitWaiting(t, s, "q", 0)
}

// A cancelled waiting claim claims nothing; one cancelled as a job
// arrives either has the job or leaves it pending.
func TestClaimWaitCancel(t *testing.T) {
	s := openTest(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	answer := claimAsync(ctx, s, waitClaimParams(1, "q"))
	awaitWaiting(t, s, "q", 1)
	cancel()
	if a := <-answer; !errors.Is(a.err, context.Canceled) || len(a.res.Jobs) != 0 {
		t.Fatalf("cancelled ClaimWait = %+v, %v; want context.Canceled", a.res, a.err)
	}
	awaitWaiting(t, s, "q", 0)
	id := enqueueOneJob(t, s, "q")
	if st := jobState(t, s, id); st != backend.StatePending {
		t.Fatalf("job after a cancelled claim is %s; want pending", st)
	}
	if _, err := s.Claim(context.Background(), waitClaimParams(1, "q")); err != nil {
		t.Fatal(err)
	}

	cancelRace(t, s, 30, func(n int) { awaitWaiting(t, s, "race", n) })
}

// Close ends a waiting claim with ErrClosed.
func TestClaimWaitClose(t *testing.T) {
	s := openTest(t, "")
	answer := claimAsync(context.Background(), s, waitClaimParams(1, "q"))
	awaitWaiting(t, s, "q", 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if a := <-answer; !errors.Is(a.err, backend.ErrClosed) {
		t.Fatalf("ClaimWait across Close = %v; want ErrClosed", a.err)
	}
}

// cancelRace cancels rounds waiting claims of queue "race" as an enqueue
// makes a job pending there: each claim either has the job, active, or
// gives up and leaves it pending. await(n) returns once n claims wait.
func cancelRace(t *testing.T, s *Store, rounds int, await func(n int)) {
	t.Helper()
	for i := range rounds {
		ctx, cancel := context.WithCancel(context.Background())
		answer := claimAsync(ctx, s, waitClaimParams(1, "race"))
		await(1)
		go cancel()
		id := enqueueOneJob(t, s, "race")
		a := <-answer
		st := jobState(t, s, id)
		switch {
		case a.err == nil && len(a.res.Jobs) == 1 && a.res.Jobs[0].ID == id && st == backend.StateActive:
			j := a.res.Jobs[0]
			if _, err := s.Complete(context.Background(), backend.CompleteParams{Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: j.ID, Token: j.LeaseToken}}}, Now: time.Now()}); err != nil {
				t.Fatal(err)
			}
		case errors.Is(a.err, context.Canceled) && st == backend.StatePending:
			if res, err := s.Claim(context.Background(), waitClaimParams(1, "race")); err != nil || len(res.Jobs) != 1 {
				t.Fatalf("round %d: job left by a cancelled claim not claimable: %+v, %v", i, res, err)
			}
		default:
			t.Fatalf("round %d: ClaimWait = %+v, %v with the job %s; want it claimed or pending", i, a.res, a.err, st)
		}
		await(0)
	}
}
