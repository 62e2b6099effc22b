package redis

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/redis/rueidis"
)

// awaitHandoffs waits until n waiting claims of s are registered for
// enqueues to fill.
func awaitHandoffs(t *testing.T, s *Store, n int) {
	t.Helper()
	waitFor(t, 10*time.Second, "registered waiting claims", func() bool { return int(s.handoffs.n.Load()) == n })
}

// deafen stops s's wake-ups once they work: a waiting claim can then only
// be filled by an enqueue of s.
func deafen(t *testing.T, s *Store) {
	t.Helper()
	sub, err := s.Subscribe(context.Background(), backend.SubscribeParams{Queues: []string{"none"}})
	if err != nil {
		t.Fatal(err)
	}
	sub.Close()
	s.notify.stop()
}

func enqueueJob(t *testing.T, s *Store, nj backend.NewJob) backend.EnqueuedJob {
	t.Helper()
	res, err := s.Enqueue(context.Background(), backend.EnqueueParams{Jobs: []backend.NewJob{nj}, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return res.Jobs[0]
}

// An enqueue fills a waiting claim of its store in its own round trip:
// the job is active when Enqueue returns, and the waiting claim has it,
// without a wake-up. Failed before handoff.go: the claim waited for a
// wake-up that never came, and the job stayed pending.
func TestEnqueueFillsWaitingClaim(t *testing.T) {
	s := openTest(t, "")
	deafen(t, s)
	enqueueFillsWaitingClaim(t, s, "q", "q", "q")
}

// enqueueFillsWaitingClaim checks, one queue after another, that a
// waiting claim of the queue has its job when Enqueue returns; s must
// be deaf (TestCluster runs it too, over queues of several slots).
func enqueueFillsWaitingClaim(t *testing.T, s *Store, queues ...string) {
	ctx := context.Background()
	for round, q := range queues {
		p := waitClaimParams(5, q)
		answer := claimAsync(ctx, s, p)
		awaitHandoffs(t, s, 1)
		// The claim's clock runs behind the local one by the time between
		// p.Now and its start, at most lag. Some time passes before the
		// enqueue, so a lease counted from p.Now instead of from the fill
		// would end 20 ms before the bound.
		lag := time.Since(p.Now)
		time.Sleep(20 * time.Millisecond)
		before := time.Now()
		id := enqueueOneJob(t, s, q)
		if st := jobState(t, s, id); st != backend.StateActive {
			t.Fatalf("round %d: job is %s when Enqueue returns; want active", round, st)
		}
		select {
		case a := <-answer:
			if a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != id {
				t.Fatalf("round %d: ClaimWait = %+v, %v; want job %s", round, a.res, a.err, id)
			}
			// The store keeps milliseconds.
			want := before.Add(time.Minute - lag).Truncate(time.Millisecond)
			if exp := a.res.Jobs[0].LeaseExpiresAt; exp.Before(want) {
				t.Fatalf("lease expires at %v; want a minute after the enqueue (%v), less the claim's lag %v, or later", exp, before, lag)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the waiting claim was not filled", round)
		}
		awaitHandoffs(t, s, 0)
	}
}

// Each enqueue takes one waiting claim, the oldest first; enqueues that
// make no job pending (scheduled, or a duplicate of a unique key) leave
// the claims waiting, or give them back at once.
func TestEnqueueFillsWaitingClaimsInTurn(t *testing.T) {
	s := openTest(t, "")
	deafen(t, s)
	ctx := context.Background()
	first := claimAsync(ctx, s, waitClaimParams(1, "q"))
	awaitHandoffs(t, s, 1)
	second := claimAsync(ctx, s, waitClaimParams(1, "q"))
	awaitHandoffs(t, s, 2)

	enqueueJob(t, s, backend.NewJob{Type: "t", Queue: "q", RunAt: time.Now().Add(time.Hour)})
	enqueueJob(t, s, backend.NewJob{Type: "t", Queue: "other"})
	if n := s.handoffs.n.Load(); n != 2 {
		t.Fatalf("waiting claims after enqueues that make no job of q pending = %d; want 2", n)
	}
	a := enqueueJob(t, s, backend.NewJob{Type: "t", Queue: "q", UniqueKey: "k", UniqueFor: time.Hour})
	if got := <-first; got.err != nil || len(got.res.Jobs) != 1 || got.res.Jobs[0].ID != a.ID {
		t.Fatalf("oldest waiting claim = %+v, %v; want job %s", got.res, got.err, a.ID)
	}
	dup := enqueueJob(t, s, backend.NewJob{Type: "t", Queue: "q", UniqueKey: "k", UniqueFor: time.Hour})
	if !dup.Duplicate {
		t.Fatalf("second enqueue of unique key k = %+v; want a duplicate", dup)
	}
	awaitHandoffs(t, s, 1) // the duplicate's claim got nothing: it waits again
	b := enqueueOneJob(t, s, "q")
	if got := <-second; got.err != nil || len(got.res.Jobs) != 1 || got.res.Jobs[0].ID != b {
		t.Fatalf("second waiting claim = %+v, %v; want job %s", got.res, got.err, b)
	}
}

// A batch of one queue fills a waiting claim with its jobs, as a single
// enqueue does.
func TestEnqueueBatchFillsWaitingClaim(t *testing.T) {
	s := openTest(t, "")
	deafen(t, s)
	ctx := context.Background()
	batch := func(queues ...string) []backend.EnqueuedJob {
		jobs := make([]backend.NewJob, len(queues))
		for i, q := range queues {
			jobs[i] = backend.NewJob{Type: "t", Queue: q}
		}
		res, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return res.Jobs
	}
	answer := claimAsync(ctx, s, waitClaimParams(5, "q"))
	awaitHandoffs(t, s, 1)
	jobs := batch("q", "q", "q")
	a := <-answer
	if a.err != nil || len(a.res.Jobs) != 3 {
		t.Fatalf("ClaimWait = %+v, %v; want the 3 jobs of the batch", a.res, a.err)
	}
	for _, j := range jobs {
		if st := jobState(t, s, j.ID); st != backend.StateActive {
			t.Fatalf("job %s of the batch is %s; want active", j.ID, st)
		}
	}
}

// A batch over several queues, one MULTI, fills in its own round trip a
// waiting claim of each of its queues that the claim begins with, with
// what Claim would take after the whole batch (here the job of higher
// priority); a claim that begins with another queue waits on. Failed
// before: the batch filled no claim, and its jobs stayed pending.
func TestEnqueueMultiQueueBatchFillsWaitingClaims(t *testing.T) {
	s := openTest(t, "")
	deafen(t, s)
	ctx := context.Background()
	batch := func(jobs ...backend.NewJob) []backend.EnqueuedJob {
		res, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return res.Jobs
	}
	// Called as Enqueue returns: the jobs are claimed then, with no
	// wake-up (s is deaf), so in the enqueue's round trip.
	wantFilled := func(what string, answer <-chan waitClaimAnswer, ids ...string) {
		t.Helper()
		for _, id := range ids {
			if st := jobState(t, s, id); st != backend.StateActive {
				t.Fatalf("job %s for %s is %s when Enqueue returns; want active", id, what, st)
			}
		}
		select {
		case a := <-answer:
			var got []string
			for _, j := range a.res.Jobs {
				got = append(got, j.ID)
			}
			if a.err != nil || !slices.Equal(got, ids) {
				t.Fatalf("%s = %v, %v; want jobs %v", what, got, a.err, ids)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s was not filled", what)
		}
	}
	onB := claimAsync(ctx, s, waitClaimParams(1, "b"))
	awaitHandoffs(t, s, 1)
	pc := waitClaimParams(5, "c")
	pc.Queues = []string{"c", "a"}
	onCA := claimAsync(ctx, s, pc)
	awaitHandoffs(t, s, 2)

	jobs := batch(backend.NewJob{Type: "t", Queue: "a"}, backend.NewJob{Type: "t", Queue: "b"},
		backend.NewJob{Type: "t", Queue: "b", Priority: 5})
	wantFilled("the claim of b", onB, jobs[2].ID)
	for _, j := range []backend.EnqueuedJob{jobs[0], jobs[1]} {
		if st := jobState(t, s, j.ID); st != backend.StatePending {
			t.Fatalf("job %s is %s; want pending", j.ID, st)
		}
	}
	awaitHandoffs(t, s, 1) // the claim of c and a waits on

	onD := claimAsync(ctx, s, waitClaimParams(5, "d"))
	awaitHandoffs(t, s, 2)
	more := batch(backend.NewJob{Type: "t", Queue: "c"}, backend.NewJob{Type: "t", Queue: "d"})
	wantFilled("the claim of c and a", onCA, more[0].ID)
	wantFilled("the claim of d", onD, more[1].ID)
	awaitHandoffs(t, s, 0)
}

// A waiting claim still wakes for another process's enqueue.
func TestWaitingClaimHearsOtherStores(t *testing.T) {
	s := openTest(t, "")
	o := openTwin(t, s)
	answer := claimAsync(context.Background(), s, waitClaimParams(1, "q"))
	awaitHandoffs(t, s, 1)
	id := enqueueOneJob(t, o, "q")
	select {
	case a := <-answer:
		if a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != id {
			t.Fatalf("ClaimWait = %+v, %v; want job %s", a.res, a.err, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting claim did not wake for another store's enqueue")
	}
}

// takeWaiting takes the one waiting claim of queue as an enqueue would,
// enqueues a job there and claims it for the waiting claim, as the
// enqueue's claim would; it returns the claim, the job and the fill.
func takeWaiting(t *testing.T, s *Store, queue string) (*handoffClaim, string, handoffFill) {
	t.Helper()
	awaitHandoffs(t, s, 1)
	hc := s.handoffs.take(queue)
	if hc == nil {
		t.Fatal("no waiting claim to take")
	}
	id := enqueueOneJob(t, s, queue) // no waiting claim left: stays pending
	p := hc.p
	p.Now = time.Now()
	res, err := s.Claim(context.Background(), p)
	if err != nil || len(res.Jobs) != 1 || res.Jobs[0].ID != id {
		t.Fatalf("claim for the waiting claim = %+v, %v; want job %s", res, err, id)
	}
	return hc, id, handoffFill{res: res}
}

// A waiting claim whose ctx ends while an enqueue fills it waits for the
// fill and releases what it got: no job is left active.
func TestWaitingClaimCancelledWhileFilled(t *testing.T) {
	s := openTest(t, "")
	deafen(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	answer := claimAsync(ctx, s, waitClaimParams(1, "q"))
	awaitHandoffs(t, s, 1)
	hc, id, fill := takeWaiting(t, s, "q")
	cancel()
	select {
	case a := <-answer:
		t.Fatalf("ClaimWait returned %+v, %v before its fill", a.res, a.err)
	case <-time.After(20 * time.Millisecond):
	}
	hc.filled <- fill
	if a := <-answer; !errors.Is(a.err, context.Canceled) || len(a.res.Jobs) != 0 {
		t.Fatalf("ClaimWait cancelled while filled = %+v, %v; want context.Canceled", a.res, a.err)
	}
	if st := jobState(t, s, id); st != backend.StatePending {
		t.Fatalf("job taken for a cancelled waiting claim is %s; want pending", st)
	}
}

// A waiting claim whose fill failed claims again; one whose store closes
// while it is filled returns the fill's jobs.
func TestWaitingClaimFillFailedOrClosed(t *testing.T) {
	s := openTest(t, "")
	deafen(t, s)
	ctx := context.Background()
	answer := claimAsync(ctx, s, waitClaimParams(1, "q"))
	awaitHandoffs(t, s, 1)
	hc := s.handoffs.take("q")
	id := enqueueOneJob(t, s, "q") // no waiting claim: stays pending
	hc.filled <- handoffFill{signalled: true}
	if a := <-answer; a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != id {
		t.Fatalf("ClaimWait after a failed fill = %+v, %v; want job %s", a.res, a.err, id)
	}

	answer = claimAsync(ctx, s, waitClaimParams(1, "q"))
	hc, id, fill := takeWaiting(t, s, "q")
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case a := <-answer:
		t.Fatalf("ClaimWait returned %+v, %v before its fill", a.res, a.err)
	case <-time.After(20 * time.Millisecond):
	}
	hc.filled <- fill
	if a := <-answer; a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != id {
		t.Fatalf("ClaimWait filled as the store closed = %+v, %v; want job %s", a.res, a.err, id)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// An enqueue whose pair fails (here: the server lost the scripts) still
// writes its job, and the waiting claim it took claims again and gets it.
func TestWaitingClaimAfterFailedPair(t *testing.T) {
	ps := startServer(t, "--appendonly", "no")
	s := openPrivate(t, ps)
	deafen(t, s)
	enqueueOneJob(t, s, "q") // the queue is registered: the enqueue runs no other script
	if res, err := s.Claim(context.Background(), waitClaimParams(1, "q")); err != nil || len(res.Jobs) != 1 {
		t.Fatalf("Claim = %+v, %v", res, err)
	}
	answer := claimAsync(context.Background(), s, waitClaimParams(1, "q"))
	awaitHandoffs(t, s, 1)
	for _, cmd := range [][]string{{"FUNCTION", "FLUSH"}, {"SCRIPT", "FLUSH"}} {
		if out, err := ps.cli(cmd...); err != nil {
			t.Fatalf("%v: %v %s", cmd, err, out)
		}
	}
	id := enqueueOneJob(t, s, "q")
	select {
	case a := <-answer:
		if a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != id {
			t.Fatalf("ClaimWait = %+v, %v; want job %s", a.res, a.err, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting claim taken by a failed pair never got the job")
	}
}

// Cancelled as an enqueue fills it, a waiting claim either has the job or
// leaves it pending.
func TestWaitingClaimCancelRace(t *testing.T) {
	s := openTest(t, "")
	deafen(t, s)
	cancelRace(t, s, 50, func(n int) { awaitHandoffs(t, s, n) })
}

// BenchmarkIdleEnqueueToClaim times one job at a time from before its
// Enqueue to the return of the waiting claim that takes it (a lone
// ClaimWait of one job, as an idle worker's), on a private server, and
// counts the server's socket reads and writes and its PUBLISH calls per
// job with the completion of each job included (whose script publishes
// on the done channel), the process's CPU per job, and the median wait.
// Jobs come 2ms apart, so that the claim waits for each.
//
//	go test -run '^$' -bench IdleEnqueueToClaim -benchtime 2000x ./backend/redis/
func BenchmarkIdleEnqueueToClaim(b *testing.B) {
	ps := startServer(b, "--appendonly", "no")
	ctx := context.Background()
	s, err := Open(ctx, Options{Addrs: []string{ps.addr()}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	claimed := make(chan time.Time)
	completed := make(chan error)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for wctx.Err() == nil {
			res, err := s.ClaimWait(wctx, waitClaimParams(1, "idle"))
			if err != nil || len(res.Jobs) == 0 {
				continue
			}
			claimed <- time.Now()
			j := res.Jobs[0]
			_, err = s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: j.ID, Token: j.LeaseToken}}}, Now: time.Now()})
			completed <- err
		}
	}()
	one := func() time.Duration {
		time.Sleep(2 * time.Millisecond) // idle: the claim is waiting
		began := time.Now()
		if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{{Type: "t", Queue: "idle", Payload: benchPayload}}}); err != nil {
			b.Fatal(err)
		}
		at := <-claimed
		if err := <-completed; err != nil {
			b.Fatal(err)
		}
		return at.Sub(began)
	}
	for range 20 { // warm up: connections, scripts, the queue's number
		one()
	}
	// counts returns the server's socket reads and writes (INFO stats
	// total_reads_processed, total_writes_processed: a pipelined write is
	// one read) and PUBLISH calls so far.
	counts := func() (reads, writes, publishes float64) {
		out, err := ps.cli("INFO", "stats", "commandstats")
		if err != nil {
			b.Fatal(err)
		}
		for line := range strings.Lines(out) {
			name, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			switch name {
			case "total_reads_processed":
				reads, _ = strconv.ParseFloat(v, 64)
			case "total_writes_processed":
				writes, _ = strconv.ParseFloat(v, 64)
			case "cmdstat_publish":
				calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
				publishes, _ = strconv.ParseFloat(calls, 64)
			}
		}
		return reads, writes, publishes
	}
	waits := make([]time.Duration, 0, b.N)
	r0, w0, p0 := counts()
	cpu0 := processCPU()
	b.ResetTimer()
	for range b.N {
		waits = append(waits, one())
	}
	b.StopTimer()
	cpu1 := processCPU()
	r1, w1, p1 := counts()
	slices.Sort(waits)
	// Less the first INFO call's own read and write (counted by the
	// second).
	b.ReportMetric((r1-r0-1)/float64(b.N), "server-reads/job")
	b.ReportMetric((w1-w0-1)/float64(b.N), "server-writes/job")
	b.ReportMetric((p1-p0)/float64(b.N), "publishes/job")
	b.ReportMetric((cpu1-cpu0)/float64(b.N), "go-cpu-µs/job")
	b.ReportMetric(float64(waits[len(waits)/2].Microseconds()), "p50-µs")
}

// listenWake returns the messages published on queue's wake channel of
// s from now on, received by a client of their own, in order.
func listenWake(t *testing.T, s *Store, queue string) <-chan string {
	t.Helper()
	c, err := rueidis.NewClient(s.clientOpt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-ended
		c.Close()
	})
	channel := s.keys.wakeChannel(queue)
	all, msgs := make(chan string, 100), make(chan string, 100)
	go func() {
		defer close(ended)
		c.Receive(ctx, c.B().Subscribe().Channel(channel).Build(), func(m rueidis.PubSubMessage) { all <- m.Message })
	}()
	// Subscribed once a probe of ours comes back; what came before it
	// is dropped, and so are later copies of the probe.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		if err := c.Do(ctx, c.B().Publish().Channel(channel).Message("listening").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-all:
			if m == "listening" {
				go func() {
					for m := range all {
						if m != "listening" {
							msgs <- m
						}
					}
				}()
				return msgs
			}
		case <-tick.C:
		case <-deadline:
			t.Fatal("no message came back on the wake channel")
		}
	}
}

// wakesUntil returns the messages on msgs (from listenWake) that came
// before end, which it publishes on queue's wake channel of s.
func wakesUntil(t *testing.T, s *Store, msgs <-chan string, queue string) []string {
	t.Helper()
	ctx := context.Background()
	if err := s.client.Do(ctx, s.client.B().Publish().Channel(s.keys.wakeChannel(queue)).Message("end").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		select {
		case m := <-msgs:
			if m == "end" {
				return got
			}
			got = append(got, m)
		case <-time.After(10 * time.Second):
			t.Fatalf("the end marker did not come back; messages before it: %q", got)
		}
	}
}

// An enqueue whose job a waiting claim of its store takes publishes no
// wake-up: every subscribed process would claim nothing for it. Failed
// before the lean enqueue of a filled claim went quiet: one wake-up per
// job.
func TestHandedOffJobWakesNobody(t *testing.T) {
	s := openTest(t, "")
	deafen(t, s)
	msgs := listenWake(t, s, "q")
	answer := claimAsync(context.Background(), s, waitClaimParams(1, "q"))
	awaitHandoffs(t, s, 1)
	id := enqueueOneJob(t, s, "q")
	if a := <-answer; a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != id {
		t.Fatalf("ClaimWait = %+v, %v; want job %s", a.res, a.err, id)
	}
	if got := wakesUntil(t, s, msgs, "q"); len(got) != 0 {
		t.Fatalf("wake-ups for a job a waiting claim took: %q; want none", got)
	}
}

// Jobs of a filled claim's enqueue that the claim did not take, left
// over by a claim of fewer jobs or a paused queue, are announced.
func TestHandedOffLeftoversWake(t *testing.T) {
	s := openTest(t, "")
	deafen(t, s)
	ctx := context.Background()
	msgs := listenWake(t, s, "q")
	answer := claimAsync(ctx, s, waitClaimParams(1, "q"))
	awaitHandoffs(t, s, 1)
	nj := backend.NewJob{Type: "t", Queue: "q"}
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: []backend.NewJob{nj, nj}, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if a := <-answer; a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != res.Jobs[0].ID {
		t.Fatalf("ClaimWait = %+v, %v; want job %s", a.res, a.err, res.Jobs[0].ID)
	}
	if got := wakesUntil(t, s, msgs, "q"); len(got) != 1 {
		t.Fatalf("wake-ups for a batch of 2 a claim of 1 took from: %q; want one", got)
	}
	if st := jobState(t, s, res.Jobs[1].ID); st != backend.StatePending {
		t.Fatalf("second job is %s; want pending", st)
	}

	paused := true
	if _, err := s.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: "q", Paused: &paused, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	answer = claimAsync(ctx, s, waitClaimParams(1, "q"))
	awaitHandoffs(t, s, 1)
	enqueueOneJob(t, s, "q")
	if got := wakesUntil(t, s, msgs, "q"); len(got) != 1 {
		t.Fatalf("wake-ups for a job of a paused queue: %q; want one", got)
	}
	select {
	case a := <-answer:
		t.Fatalf("ClaimWait on a paused queue = %+v, %v", a.res, a.err)
	default:
	}
}
