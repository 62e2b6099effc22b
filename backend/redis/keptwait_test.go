package redis

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fcalls returns how many FCALL and EVALSHA calls private server ps has
// run.
func fcalls(t *testing.T, ps *privateServer) int {
	t.Helper()
	out, err := ps.cli("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(out) {
		name, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name == "cmdstat_fcall" || name == "cmdstat_evalsha" {
			calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			k, _ := strconv.Atoi(calls)
			n += k
		}
	}
	return n
}

// The waiting claim after one that an enqueue filled with its queue's
// last job takes over its subscription and waits without a claim of its
// own: an idle worker's job costs the enqueue's script and its
// completion, not a claim that finds nothing besides. The job enqueued
// next still fills it.
func TestWaitingClaimAfterFillMakesNoClaim(t *testing.T) {
	ps := startServer(t, "--appendonly", "no")
	s := openPrivate(t, ps)
	deafen(t, s)
	ctx := context.Background()
	answer := claimAsync(ctx, s, waitClaimParams(2, "q"))
	awaitHandoffs(t, s, 1)
	id := enqueueOneJob(t, s, "q")
	if a := <-answer; a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != id {
		t.Fatalf("ClaimWait = %+v, %v; want job %s", a.res, a.err, id)
	}
	before := fcalls(t, ps)
	answer = claimAsync(ctx, s, waitClaimParams(2, "q"))
	awaitHandoffs(t, s, 1)
	if n := fcalls(t, ps) - before; n != 0 {
		t.Errorf("the waiting claim after a filled one ran %d scripts before it waited; want 0", n)
	}
	id = enqueueOneJob(t, s, "q")
	if a := <-answer; a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != id {
		t.Fatalf("second ClaimWait = %+v, %v; want job %s", a.res, a.err, id)
	}
}

// A job that another store makes pending between a filled waiting claim
// and the next is claimed by the next: the subscription it takes over
// heard of it.
func TestWaitingClaimAfterFillHearsOtherStores(t *testing.T) {
	s := openTest(t, "")
	o := openTwin(t, s)
	ctx := context.Background()
	for i := range 20 {
		answer := claimAsync(ctx, s, waitClaimParams(2, "q"))
		awaitHandoffs(t, s, 1)
		id := enqueueOneJob(t, s, "q")
		if a := <-answer; a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != id {
			t.Fatalf("ClaimWait = %+v, %v; want job %s", a.res, a.err, id)
		}
		other := enqueueOneJob(t, o, "q")
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := s.ClaimWait(wctx, waitClaimParams(2, "q"))
		cancel()
		if err != nil || len(res.Jobs) != 1 || res.Jobs[0].ID != other {
			t.Fatalf("%d: ClaimWait after another store's enqueue = %+v, %v; want job %s (state %s)", i, res, err, other, jobState(t, s, other))
		}
	}
}

// A waiting claim filled while a wake-up came (here: another store's
// job) keeps no subscription: the wake-up went with its answer, and the
// next waiting claim claims before it waits and gets that job.
func TestWaitingClaimFilledWithWakeupKeepsNothing(t *testing.T) {
	s := openTest(t, "")
	o := openTwin(t, s)
	ctx := context.Background()
	answer := claimAsync(ctx, s, waitClaimParams(2, "q"))
	hc, id, fill := takeWaiting(t, s, "q")
	other := enqueueOneJob(t, o, "q")
	waitFor(t, 10*time.Second, "the wake-up held for the claim being filled", func() bool {
		s.handoffs.mu.Lock()
		defer s.handoffs.mu.Unlock()
		return hc.missed
	})
	s.handoffs.fill(hc, fill)
	if a := <-answer; a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != id {
		t.Fatalf("ClaimWait = %+v, %v; want job %s", a.res, a.err, id)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := s.ClaimWait(wctx, waitClaimParams(2, "q"))
	if err != nil || len(res.Jobs) != 1 || res.Jobs[0].ID != other {
		t.Fatalf("ClaimWait after a fill with a wake-up = %+v, %v; want job %s", res, err, other)
	}
}
