package redis

import (
	"cmp"
	"context"
	"encoding/hex"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/redis/rueidis"
)

// handoffs are the waiting claims (ClaimWait) of this Store that an
// enqueue of the Store may fill: an enqueue that makes a job pending in a
// queue a waiting claim begins with takes that claim and sends it, the
// ordinary claim script with the claim's parameters, right behind its own
// script in the same write on the same connection. Both replies come back
// in one round trip, and the enqueueing goroutine hands the claimed jobs
// to the waiting one: an idle worker's job starts one round trip (and a
// Pub/Sub message) sooner than when the worker hears the wake-up and
// claims. A lean enqueue for a claim with no type filter or byte budget
// (an idle worker's) sends one script that does both, "enqueue claim"
// (enqueueclaim.go), instead of the pair. A lean enqueue (every job
// plain pending) that fills a claim publishes no wake-up: the claim
// takes its jobs, and the wake-up would only send every subscribed
// process, this one included, to claim nothing. It is published for the
// jobs the claim left (a claim of fewer jobs, a paused queue, a
// failure): after the pair, or by "enqueue claim" itself.
//
// A claim is taken by one enqueue at a time and always given back: with
// the jobs it got, or with none (it then waits again). Its Pub/Sub
// subscription stays meanwhile, so other processes' enqueues still wake
// it. Only a claim in strict order is registered, and only an enqueue to
// its first queue fills it, so the claim takes jobs in the order Claim
// would; it claims that queue only (Claim may take fewer than Max). A
// batch over several queues, one MULTI, fills a claim of each of its
// queues with the claims sent right behind the EXEC, in the same write
// (runEnqueue): each then sees the whole batch, as a Claim after the
// batch would. On a Cluster such a batch fills none: its queues' scripts
// go apart, to their slots' nodes.
type handoffs struct {
	// n counts the claims registered: an enqueue looks no further while
	// it is 0, which costs the enqueue of a store without waiting claims
	// one atomic load.
	n  atomic.Int32
	mu sync.Mutex
	// list holds the claims registered, oldest first: the oldest is
	// filled first.
	list []*handoffClaim
}

// handoffClaim is one waiting claim an enqueue may fill.
type handoffClaim struct {
	p     backend.ClaimParams
	queue string // the first queue of its claim order
	// began is when the claim began, on the local clock: a claim filled
	// later leases its jobs at p.Now plus the time waited.
	began time.Time
	// filled receives the claim's answer, once per taking.
	filled chan handoffFill
	// taken is set while an enqueue fills the claim; missed, when a
	// wake-up came meanwhile, which then goes with the answer (hold)
	// instead of waking the claim's goroutine before its answer is in.
	// Both are guarded by handoffs.mu.
	taken, missed bool
}

// handoffFill is what an enqueue's claim got for a waiting claim: jobs,
// or none (also when the claim failed; the waiting claim then waits
// again, and claims itself on the next wake-up).
type handoffFill struct {
	res backend.ClaimResult
	// signalled is set when the claim failed, or a wake-up came for the
	// claim while it was filled: a job may be pending that it missed, and
	// the waiting claim claims again when the answer has no jobs.
	signalled bool
}

// newHandoffClaim returns p's claim for registering, or nil when p is not
// one an enqueue may fill: one whose claim order is not p.Queues as
// given (weighted order).
func newHandoffClaim(p backend.ClaimParams, began time.Time) *handoffClaim {
	if p.Mode == backend.ClaimWeighted || len(p.Queues) == 0 {
		return nil
	}
	return &handoffClaim{p: p, queue: p.Queues[0], began: began, filled: make(chan handoffFill, 1)}
}

// register makes c available to enqueues.
func (h *handoffs) register(c *handoffClaim) {
	h.mu.Lock()
	h.list = append(h.list, c)
	h.n.Add(1)
	h.mu.Unlock()
}

// withdraw takes c back from enqueues; false means an enqueue took it,
// and its answer comes on c.filled.
func (h *handoffs) withdraw(c *handoffClaim) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := slices.Index(h.list, c)
	if i < 0 {
		return false
	}
	h.list = slices.Delete(h.list, i, i+1)
	h.n.Add(-1)
	return true
}

// take removes and returns the oldest claim that begins with queue, or
// nil.
func (h *handoffs) take(queue string) *handoffClaim {
	if h.n.Load() == 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, c := range h.list {
		if c.queue == queue {
			h.list = slices.Delete(h.list, i, i+1)
			h.n.Add(-1)
			c.taken = true
			return c
		}
	}
	return nil
}

// hold reports whether c is being filled, noting a wake-up for it: the
// wake-up then goes with its answer (see handoffFill.signalled).
func (h *handoffs) hold(c *handoffClaim) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.missed = c.missed || c.taken
	return c.taken
}

// fill gives c, taken, its answer f.
func (h *handoffs) fill(c *handoffClaim, f handoffFill) {
	h.mu.Lock()
	f.signalled = f.signalled || c.missed
	c.taken, c.missed = false, false
	h.mu.Unlock()
	c.filled <- f
}

// runEnqueueOne runs the one enqueue call of group g (own as enqueue
// says): when g makes a job pending and a waiting claim of this store
// begins with g's queue, with that claim behind it (enqueueHandoff).
func (s *store) runEnqueueOne(ctx context.Context, c call, g *enqueueGroup, own bool) rueidis.RedisResult {
	if s.handoffs.n.Load() != 0 && g.makesPending() {
		if w := s.handoffs.take(g.name); w != nil {
			return s.enqueueHandoff(ctx, c, g, w)
		}
	}
	if own {
		return s.evalOwn(ctx, c)
	}
	return s.eval(ctx, c.s, c.keys, c.args)
}

// makesPending reports whether a job of the group is to be pending.
func (g *enqueueGroup) makesPending() bool {
	if g.lean {
		return true
	}
	for k := range g.pos {
		if g.args[enqueueHead+k*enqueueStride+1] == "p" {
			return true
		}
	}
	return false
}

// enqueueHandoff runs enqueue call c of group g with waiting claim w's
// claim of g's queue behind it, in one write on a connection of its own
// when one is free (else the shared one), hands w what the claim got and
// returns the enqueue's reply.
//
// Once sent, the pair is not abandoned for ctx, neither its cancellation
// nor its deadline: the claim may take jobs, which w then must get.
// The connection's timeouts bound it.
func (s *store) enqueueHandoff(ctx context.Context, c call, g *enqueueGroup, w *handoffClaim) rueidis.RedisResult {
	if c.s == s.scripts.enqueueLean && leanClaim(w.p) {
		return s.enqueueClaim(ctx, c, g, w)
	}
	octx := context.WithoutCancel(ctx)
	cc, p := s.handoffCall(g, w)
	var d rueidis.CoreClient = s.client
	var rc *runConn
	if !s.opts.Cluster {
		if rc = s.runConns.take(s.client); rc != nil {
			d = rc.c
		}
	}
	// A lean enqueue goes quiet: the claim behind it takes its jobs, and
	// a wake-up would only send every subscribed process, this one too,
	// to claim nothing. The wake-up is owed, and published after, for
	// the jobs the claim did not take.
	send, quiet := c, c.s == s.scripts.enqueueLean
	if quiet {
		// In leanArgs's spare capacity; c.args stays as it was.
		send.args = append(c.args, leanQuiet)
	}
	replies := d.DoMulti(octx, s.scriptCmd(send), s.scriptCmd(cc))
	enq, claimed := replies[0], replies[1]
	fill := s.handoffAnswer(g, p, claimed, enq.Error() != nil)
	if err := enq.Error(); noScript(err) || noFunction(err) {
		// The server lacked the script (or the library): the enqueue goes
		// again alone, loading it, and publishes its wake-up.
		enq = s.evalOn(octx, d, c)
		quiet = false
	}
	if rc != nil {
		s.runConns.give(rc, enq.Error() != nil)
	}
	s.handoffs.fill(w, fill)
	yieldToFilled(len(fill.res.Jobs) > 0)
	if quiet && !claimedAll(c.args, fill.res.Jobs) {
		// Also when either script failed: the enqueue may have written
		// its jobs, and a wake-up too many costs an empty claim.
		s.wake(octx, g.name)
	}
	return enq
}

// yieldToFilled lets the goroutine of a waiting claim just given jobs
// (filled) run at once, on this processor, ahead of the rest of the
// enqueue. The send on its channel made it this processor's next
// goroutine, which otherwise runs only once the enqueuing goroutine
// blocks, or once another processor, woken for it, steals it after a
// pause of its own: BenchmarkIdleEnqueueToClaim's hop from the fill to
// the waiting claim's return went from about 7 µs to 5, and kyu bench's
// (that hop to the fetcher) from 12-14 µs to 5-7. The enqueuing
// goroutine goes on a moment later, on the next processor free.
func yieldToFilled(filled bool) {
	if filled {
		runtime.Gosched()
	}
}

// takeHandoffs takes, for each group of a batch that makes a job pending,
// the oldest waiting claim that begins with its queue, if any: a batch
// over several queues fills a claim of each (runEnqueue). It returns the
// claims and the index in groups of each one's group; nothing, having
// read one atomic, when no claim waits.
func (s *store) takeHandoffs(groups []*enqueueGroup) (ws []*handoffClaim, at []int) {
	if s.handoffs.n.Load() == 0 {
		return nil, nil
	}
	for i, g := range groups {
		if !g.makesPending() {
			continue
		}
		if w := s.handoffs.take(g.name); w != nil {
			ws, at = append(ws, w), append(at, i)
		}
	}
	return ws, at
}

// handoffCall is the claim that fills waiting claim w from g's queue,
// and its parameters: w's, leasing from now (its Now plus the time it
// waited).
func (s *store) handoffCall(g *enqueueGroup, w *handoffClaim) (call, backend.ClaimParams) {
	p := w.p
	p.Now = p.Now.Add(time.Since(w.began))
	return call{s: s.scripts.claim, keys: s.keysOf(s.scripts.claim, g.num), args: claimArgs(p, g.name, 0, 0, 0)}, p
}

// handoffAnswer is a waiting claim's answer from the reply of its claim
// p of g's queue, sent behind an enqueue of g that failed or not
// (enqFailed). A claim that failed, or that got nothing behind a failed
// enqueue, may have missed the job: the waiting claim claims again.
func (s *store) handoffAnswer(g *enqueueGroup, p backend.ClaimParams, claimed rueidis.RedisResult, enqFailed bool) handoffFill {
	if claimed.Error() != nil {
		return handoffFill{signalled: true}
	}
	got, err := s.claimed(g.name, claimed, hex.EncodeToString([]byte(p.WorkerID)), p.WorkerID, true)
	return handoffFillOf(got, err, enqFailed)
}

// handoffFillOf is handoffAnswer of a claim that got got, or failed with
// err.
func handoffFillOf(got queueClaim, err error, enqFailed bool) handoffFill {
	if err != nil {
		return handoffFill{signalled: true}
	}
	slices.SortStableFunc(got.jobs, func(a, b *backend.Job) int { return cmp.Compare(b.Priority, a.Priority) })
	return handoffFill{res: backend.ClaimResult{Jobs: got.jobs, Truncated: got.stopped}, signalled: len(got.jobs) == 0 && enqFailed}
}

// leanQuiet is the flag that ends the ARGV of a quiet "enqueue lean"
// (lua/enqueue_lean.lua).
const leanQuiet = "q"

// claimedAll reports whether jobs holds every job of the ARGV args of an
// "enqueue lean" call (queue name, then id, score and record per job).
func claimedAll(args []string, jobs []*backend.Job) bool {
	for i := 1; i < len(args); i += 3 {
		if !slices.ContainsFunc(jobs, func(j *backend.Job) bool { return j.ID == args[i] }) {
			return false
		}
	}
	return true
}

// wake publishes the wake-up of queue that a quiet enqueue owes (see
// enqueueHandoff). A failure is logged: the subscribers then find the
// jobs at their next poll.
func (s *store) wake(ctx context.Context, queue string) {
	cmd := s.client.B().Publish().Channel(s.keys.wakeChannel(queue)).Message("1").Build()
	if err := s.client.Do(ctx, cmd).Error(); err != nil {
		s.log.Warn("wake-up after a filled waiting claim failed; subscribers find the jobs at their next poll", "queue", queue, "err", err)
	}
}

// scriptCmd is c as FCALL when the server runs functions, else EVALSHA.
func (s *store) scriptCmd(c call) rueidis.Completed {
	if cmd, ok := s.fcallCmd(c); ok {
		return cmd
	}
	return s.evalCmd(c, false)
}
