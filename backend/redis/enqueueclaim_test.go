package redis

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// An idle job, one enqueued while a waiting claim of its queue waits,
// costs Redis one script run of four commands: the enqueue and the claim
// are one script ("enqueue claim"), and a lone job of a queue with
// nothing else to do is written active at once. Failed before: two
// scripts (the enqueue, then the claim script behind it) of twelve
// commands.
func TestIdleJobRunsOneScript(t *testing.T) {
	ps := startServer(t, "--appendonly", "no")
	ctx := context.Background()
	s := openPrivate(t, ps)
	deafen(t, s)
	for round := range 3 {
		p := waitClaimParams(5, "q")
		answer := claimAsync(ctx, s, p)
		awaitHandoffs(t, s, 1)
		if _, err := ps.cli("CONFIG", "RESETSTAT"); err != nil {
			t.Fatal(err)
		}
		id := enqueueOneJob(t, s, "q")
		calls := commandCalls(t, ps)
		a := <-answer
		if a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != id {
			t.Fatalf("round %d: ClaimWait = %+v, %v; want job %s", round, a.res, a.err, id)
		}
		if round == 0 {
			continue // the first enqueue registers the queue and loads the library
		}
		scripts, commands := calls["fcall"]+calls["evalsha"]+calls["eval"], int64(0)
		for name, n := range calls {
			if name != "fcall" && name != "config|resetstat" {
				commands += n
			}
		}
		if scripts != 1 || commands > 4 {
			t.Fatalf("round %d: an idle job ran %d scripts of %d commands (%v); want 1 of at most 4", round, scripts, commands, calls)
		}
		// The claim's clock is its Now moved on by the time it waited, so
		// its start falls between that Now and the answer.
		j, after := a.res.Jobs[0], time.Now()
		if j.State != backend.StateActive || j.Attempt != 1 || j.LeaseToken != 1 || j.WorkerID != "w" ||
			j.StartedAt.Before(p.Now.Truncate(time.Millisecond)) || j.StartedAt.After(after) {
			t.Fatalf("round %d: claimed job %+v; want active, attempt 1, token 1, worker w, started in [%v, %v]", round, j, p.Now, after)
		}
		got, err := s.Get(ctx, backend.GetParams{ID: id})
		if err != nil || got.State != backend.StateActive || !got.LeaseExpiresAt.Equal(j.LeaseExpiresAt) || !got.StartedAt.Equal(j.StartedAt) {
			t.Fatalf("round %d: stored job = %+v, %v; want the claimed one", round, got, err)
		}
		if _, err := s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: id, Token: j.LeaseToken}}}, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if st := jobState(t, s, id); st != backend.StateCompleted {
			t.Fatalf("round %d: job is %s after its completion; want completed", round, st)
		}
	}
}

// A job pending before the enqueue (here: a higher priority one of
// another process, which the waiting claim did not hear) goes first: the
// enqueue's claim takes the best pending job, not its own.
func TestEnqueueClaimTakesBestPending(t *testing.T) {
	s := openTest(t, "")
	deafen(t, s)
	other, err := Open(context.Background(), s.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx := context.Background()
	answer := claimAsync(ctx, s, waitClaimParams(1, "q"))
	awaitHandoffs(t, s, 1)
	high := enqueueJob(t, other, backend.NewJob{Type: "t", Queue: "q", Priority: 5})
	awaitHandoffs(t, s, 1) // other's enqueue fills none of s's claims
	low := enqueueOneJob(t, s, "q")
	if a := <-answer; a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != high.ID {
		t.Fatalf("ClaimWait = %+v, %v; want the higher priority job %s", a.res, a.err, high.ID)
	}
	if st := jobState(t, s, low); st != backend.StatePending {
		t.Fatalf("enqueued job is %s; want pending", st)
	}
}

// A queue with due work that only the claim script does (a scheduled job
// now due) has it done: the enqueue's script leaves the claim to the
// claim script, which promotes the due job and claims it before the new
// one, whose run-at is later.
func TestEnqueueClaimLeavesDueWork(t *testing.T) {
	s := openTest(t, "")
	deafen(t, s)
	ctx := context.Background()
	// The job becomes due after the waiting claim's first look, before
	// the enqueue's claim. A look slower than the margin (a loaded
	// machine) finds it due and claims it: then again, with a larger one.
	var q, due string
	var answer <-chan waitClaimAnswer
	waiting := false
	for try, margin := range []time.Duration{200 * time.Millisecond, time.Second, 5 * time.Second} {
		q = "q" + strconv.Itoa(try)
		runAt := time.Now().Add(margin)
		res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{{Type: "t", Queue: q, RunAt: runAt}}})
		if err != nil {
			t.Fatal(err)
		}
		due = res.Jobs[0].ID
		answer = claimAsync(ctx, s, waitClaimParams(1, q))
		var early *waitClaimAnswer
		waitFor(t, 10*time.Second, "a registered waiting claim", func() bool {
			select {
			case a := <-answer:
				early = &a
				return true
			default:
				return s.handoffs.n.Load() == 1
			}
		})
		if early != nil {
			if early.err != nil || len(early.res.Jobs) != 1 || early.res.Jobs[0].ID != due {
				t.Fatalf("ClaimWait = %+v, %v; want nothing, or the due job %s", early.res, early.err, due)
			}
			continue
		}
		waitFor(t, 10*time.Second, "the scheduled job's run-at", func() bool { return time.Now().After(runAt.Add(5 * time.Millisecond)) })
		waiting = true
		break
	}
	if !waiting {
		t.Fatal("every waiting claim's first look found the scheduled job due")
	}
	msgs := listenWake(t, s, q)
	id := enqueueOneJob(t, s, q)
	if a := <-answer; a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != due {
		t.Fatalf("ClaimWait = %+v, %v; want the due job %s", a.res, a.err, due)
	}
	if st := jobState(t, s, id); st != backend.StatePending {
		t.Fatalf("enqueued job is %s; want pending", st)
	}
	if got := wakesUntil(t, s, msgs, q); len(got) != 1 {
		t.Fatalf("wake-ups for the job the claim left: %q; want one", got)
	}
}

// claimedHeader writes what the claim script writes for a job it claims.
func TestClaimedHeader(t *testing.T) {
	nj := backend.NewJob{Type: "t", Queue: "q", Priority: 3, MaxAttempts: 4, UniqueKey: "k", Retention: backend.RetainNone}
	now := time.UnixMilli(1_700_000_000_000)
	j := newRecord(&nj, "id", now)
	rec := encodeRecord(&j)
	head, ok := claimedHeader(rec, "1700000000500", "1700000060500", "77")
	if !ok {
		t.Fatal("claimedHeader refused a new job's record")
	}
	j.State, j.Attempt, j.LeaseToken, j.WorkerID = backend.StateActive, 1, 1, "w"
	j.StartedAt, j.LeaseExpiresAt = time.UnixMilli(1_700_000_000_500), time.UnixMilli(1_700_000_060_500)
	want, _, _ := strings.Cut(encodeRecord(&j), "\n")
	if head != want+"\n" {
		t.Fatalf("claimedHeader = %q; want %q", head, want+"\n")
	}
	for _, bad := range []string{"", "p|0|1\nbody", "p|x|1|0|0|1||||||||\n", "p|0|1|0|0|1|||||||||\n"} {
		if _, ok := claimedHeader(bad, "1", "2", "77"); ok {
			t.Errorf("claimedHeader(%q) accepted it", bad)
		}
	}
	if got, ok := claimedRecord(rec, "1700000000500", "1700000060500", "77"); !ok || got != encodeRecord(&j) {
		t.Fatalf("claimedRecord = %q, %v; want %q", got, ok, encodeRecord(&j))
	}
}

// The reply to an idle job's "enqueue claim" that wrote it claimed is the
// bare 0: the caller sent the claimed record, and the reply carries none
// of it back. Failed before: a table of the id and the claimed record,
// some 300 bytes Redis made, converted and sent.
func TestIdleJobReplyIsBare(t *testing.T) {
	ps := startServer(t, "--appendonly", "no")
	ctx := context.Background()
	s, err := Open(ctx, Options{Addrs: []string{ps.addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	deafen(t, s)
	for round := range 3 {
		answer := claimAsync(ctx, s, waitClaimParams(1, "q"))
		awaitHandoffs(t, s, 1)
		if _, err := ps.cli("CONFIG", "RESETSTAT"); err != nil {
			t.Fatal(err)
		}
		id := enqueueOneJob(t, s, "q")
		out, err := ps.cli("INFO", "stats")
		if err != nil {
			t.Fatal(err)
		}
		a := <-answer
		if a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != id || a.res.Jobs[0].State != backend.StateActive {
			t.Fatalf("round %d: ClaimWait = %+v, %v; want job %s active", round, a.res, a.err, id)
		}
		if round == 0 {
			continue // the first enqueue registers the queue and loads the library
		}
		var sent int
		for line := range strings.Lines(out) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_net_output_bytes:"); ok {
				sent, _ = strconv.Atoi(v)
			}
		}
		// CONFIG RESETSTAT's +OK and the enqueue's reply; 40 leaves room
		// for a background PING's.
		if sent == 0 || sent > 40 {
			t.Fatalf("round %d: Redis sent %d bytes for an idle job's enqueue; want its bare reply (at most 40 with CONFIG RESETSTAT's)", round, sent)
		}
		if _, err := s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: id, Token: a.res.Jobs[0].LeaseToken}}}, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
}

// A waiting claim's look at an empty queue runs "claim lean": one script
// of two commands. Failed before: the claim script's five, with 20
// keys and 8 arguments.
func TestWaitingClaimLookIsLean(t *testing.T) {
	ps := startServer(t, "--appendonly", "no")
	ctx := context.Background()
	s := openPrivate(t, ps)
	deafen(t, s)
	if !slices.Equal(s.scripts.claimLean.keys, s.scripts.enqueueClaim.keys) {
		t.Fatalf("claim lean takes keys %v, enqueue claim %v: keysOf gives both the latter", s.scripts.claimLean.keys, s.scripts.enqueueClaim.keys)
	}
	enqueueOneJob(t, s, "q") // registers the queue, loads the library
	if res, err := s.Claim(ctx, waitClaimParams(1, "q")); err != nil || len(res.Jobs) != 1 {
		t.Fatalf("Claim = %+v, %v", res, err)
	}
	if _, err := ps.cli("CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	answer := claimAsync(wctx, s, waitClaimParams(1, "q"))
	awaitHandoffs(t, s, 1)
	calls := commandCalls(t, ps)
	cancel()
	if a := <-answer; a.err == nil {
		t.Fatalf("ClaimWait cancelled = %+v, %v", a.res, a.err)
	}
	commands := int64(0)
	for name, n := range calls {
		if name != "fcall" && name != "config|resetstat" && name != "info" {
			commands += n
		}
	}
	if calls["fcall"] != 1 || commands > 2 {
		t.Fatalf("a waiting claim's look at an empty queue ran %d scripts of %d commands (%v); want 1 of at most 2", calls["fcall"], commands, calls)
	}
}

// A waiting claim's look at a queue with due work (a scheduled job now
// due) has the claim script promote and claim it.
func TestWaitingClaimLookDoesDueWork(t *testing.T) {
	s := openTest(t, "")
	deafen(t, s)
	ctx := context.Background()
	now := time.Now()
	// Scheduled as of an hour ago, due for half an hour.
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now.Add(-time.Hour), Jobs: []backend.NewJob{{Type: "t", Queue: "q", RunAt: now.Add(-30 * time.Minute)}}})
	if err != nil {
		t.Fatal(err)
	}
	if st := jobState(t, s, res.Jobs[0].ID); st != backend.StateScheduled {
		t.Fatalf("job is %s; want scheduled until a claim promotes it", st)
	}
	got, err := s.ClaimWait(ctx, waitClaimParams(1, "q"))
	if err != nil || len(got.Jobs) != 1 || got.Jobs[0].ID != res.Jobs[0].ID {
		t.Fatalf("ClaimWait = %+v, %v; want the due job %s", got, err, res.Jobs[0].ID)
	}
}

// On a server that refuses FUNCTION, "enqueue claim" and "claim lean"
// run by EVALSHA: a lone job and a batch of two fill waiting claims.
func TestEnqueueClaimByEvalsha(t *testing.T) {
	ps := startServer(t, "--appendonly", "no", "--rename-command", "FUNCTION", "")
	ctx := context.Background()
	s := openPrivate(t, ps)
	deafen(t, s)
	enqueueFillsWaitingClaim(t, s, "q", "q")
	// Another worker's: it claims before it waits, by "claim lean",
	// instead of taking over the filled claim's subscription (keptWaits).
	p := waitClaimParams(5, "q")
	p.WorkerID = "w2"
	answer := claimAsync(ctx, s, p)
	awaitHandoffs(t, s, 1)
	nj := backend.NewJob{Type: "t", Queue: "q"}
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: []backend.NewJob{nj, nj}, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if a := <-answer; a.err != nil || len(a.res.Jobs) != 2 {
		t.Fatalf("ClaimWait = %+v, %v; want jobs %s and %s", a.res, a.err, res.Jobs[0].ID, res.Jobs[1].ID)
	}
	if !s.noFunctions.Load() {
		t.Fatal("the store runs functions on a server that refuses FUNCTION")
	}
	if out, err := ps.cli("SCRIPT", "EXISTS", s.scripts.enqueueClaim.sha(), s.scripts.claimLean.sha()); err != nil || strings.Fields(out)[0] != "1" || strings.Fields(out)[1] != "1" {
		t.Fatalf("SCRIPT EXISTS of enqueue claim and claim lean = %q, %v; want both", out, err)
	}
}
