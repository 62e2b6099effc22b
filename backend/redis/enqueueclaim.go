package redis

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/redis/rueidis"
)

// leanClaim reports whether waiting claim p is one that "enqueue claim"
// (lua/enqueue_claim.lua) can fill: one with no type filter and no byte
// budget, as an idle worker's is.
func leanClaim(p backend.ClaimParams) bool {
	return len(p.Types) == 0 && p.MaxBytes <= 0
}

// enqueueClaim is enqueueHandoff for a lean enqueue call c of group g and
// a lean waiting claim w: one script, "enqueue claim", writes the jobs
// and claims for w, so Redis runs one script, not two, and passes the
// keys and arguments of both once: 9 keys and 5 arguments beside the
// jobs', against 23 keys and 10 arguments for the pair of scripts. It
// hands w what the claim got and returns the enqueue's reply.
//
// When the queue has due work that only the claim script does (a
// deadline come, a scheduled or retry job due), the script claims
// nothing and the claim script goes after it, on the same connection: a
// round trip more, for a queue that does such work anyway. As with the
// pair, the call is not abandoned for ctx once sent.
func (s *store) enqueueClaim(ctx context.Context, c call, g *enqueueGroup, w *handoffClaim) rueidis.RedisResult {
	octx := context.WithoutCancel(ctx)
	p := w.p
	p.Now = p.Now.Add(time.Since(w.began))
	workerHex := hex.EncodeToString([]byte(p.WorkerID))
	ec := call{s: s.scripts.enqueueClaim, keys: s.keysOf(s.scripts.enqueueClaim, g.num), args: enqueueClaimArgs(c.args, p, workerHex)}
	var d rueidis.CoreClient = s.client
	var rc *runConn
	if !s.opts.Cluster {
		if rc = s.runConns.take(s.client); rc != nil {
			d = rc.c
		}
	}
	reply := s.evalOn(octx, d, ec)
	enq, flat, err := enqueueClaimReply(reply, ec.args)
	var fill handoffFill
	// owed is set when the wake-up the script leaves to its caller is due:
	// for jobs the claim script left, or when the script failed (it may
	// have written jobs, and a wake-up too many costs an empty claim).
	owed := false
	switch {
	case err != nil:
		fill, owed = handoffFill{signalled: true}, true
	case flat == nil:
		cc, cp := s.handoffCall(g, w)
		fill = s.handoffAnswer(g, cp, s.evalOn(octx, d, cc), false)
		owed = !claimedAll(c.args, fill.res.Jobs)
	default:
		got, err := s.claimedFlat(g.name, flat, workerHex, p.WorkerID)
		fill = handoffFillOf(got, err, false)
	}
	if rc != nil {
		s.runConns.give(rc, reply.Error() != nil)
	}
	s.handoffs.fill(w, fill)
	yieldToFilled(len(fill.res.Jobs) > 0)
	if owed {
		s.wake(octx, g.name)
	}
	return enq
}

// enqueueClaimArgs is the ARGV of "enqueue claim" for the ARGV lean of an
// "enqueue lean" call (queue name, then id, score and record per job)
// and claim p, whose worker id is workerHex in hex: the queue name, the
// claim's now, max, lease expiry and worker, then the jobs' values, and
// for a lone job its claimed record (claimedRecord).
func enqueueClaimArgs(lean []string, p backend.ClaimParams, workerHex string) []string {
	now, exp := strconv.FormatInt(p.Now.UnixMilli(), 10), strconv.FormatInt(p.Now.Add(p.Lease).UnixMilli(), 10)
	out := make([]string, 0, len(lean)+5)
	out = append(out, lean[0], now, strconv.Itoa(p.Max), exp, workerHex)
	out = append(out, lean[1:]...)
	if len(lean) == 4 {
		if rec, ok := claimedRecord(lean[3], now, exp, workerHex); ok {
			out = append(out, rec)
		}
	}
	return out
}

// claimedRecord is the pending record rec as the claim script writes it
// when it claims the job at now (ms) until exp for the worker workerHex:
// its header as claimedHeader makes it, then what follows rec's header
// (all of a bare record). ok is false for a header not of that shape.
func claimedRecord(rec, now, exp, workerHex string) (string, bool) {
	var f [headerFields]string
	tail, ok := splitRecord(rec, &f)
	if !ok {
		return "", false
	}
	head, ok := claimedHeaderOf(&f, now, exp, workerHex)
	if !ok {
		return "", false
	}
	return head + tail, true
}

// claimedHeader is the header of the pending record rec, with its
// newline, as the claim script writes it when it claims the job at now
// (ms) until exp for the worker workerHex: active, its attempt and token
// one up, its lease's expiry, started and worker set, in the long form
// whatever rec's (a short header's run-at stays ""). ok is false for a
// header of neither form.
func claimedHeader(rec, now, exp, workerHex string) (string, bool) {
	var f [headerFields]string
	if _, ok := splitRecord(rec, &f); !ok {
		return "", false
	}
	return claimedHeaderOf(&f, now, exp, workerHex)
}

// claimedHeaderOf is claimedHeader of a pending record whose header
// fields are f (f is changed).
func claimedHeaderOf(f *[headerFields]string, now, exp, workerHex string) (string, bool) {
	attempt, err := strconv.Atoi(f[hAttempt-1])
	if err != nil {
		return "", false
	}
	token, err := strconv.Atoi(f[hToken-1])
	if err != nil {
		return "", false
	}
	f[hState-1], f[hAttempt-1], f[hToken-1] = stateCode(backend.StateActive), strconv.Itoa(attempt+1), strconv.Itoa(token+1)
	f[hLeaseExp-1], f[hStarted-1], f[hWorker-1] = exp, now, workerHex
	var b strings.Builder
	b.Grow(128)
	for i, v := range f {
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(v)
	}
	b.WriteByte('\n')
	return b.String(), true
}

// enqueueClaimReply splits the reply of "enqueue claim", called with
// ARGV args: the enqueue's reply, as "enqueue lean" gives it, and the
// claim script's reply as strings, nil when the script left the claim to
// the claim script. The bare 0 of a lone job written claimed is both:
// the enqueue's 0, and the claim of that job with the record args hold
// (claim.lua's reply: not stopped, no bytes counted, the id, the record
// and no errors). err is set when the script failed (enq is then its
// reply) or replied otherwise.
func enqueueClaimReply(reply rueidis.RedisResult, args []string) (enq rueidis.RedisResult, flat []string, err error) {
	if err := reply.Error(); err != nil {
		return reply, nil, err
	}
	if code, err := reply.AsInt64(); err == nil && code == 0 && len(args) == 9 {
		return reply, []string{"0", "0", args[5], args[8], ""}, nil
	}
	arr, err := reply.ToArray()
	if err != nil || len(arr) == 0 {
		err = fmt.Errorf("kyu/redis: enqueue: unexpected reply %s", reply.String())
		return rueidis.NewErrorResult(err), nil, err
	}
	enq = rueidis.NewResult(arr[0], nil)
	if len(arr) == 1 {
		return enq, nil, nil
	}
	flat = make([]string, len(arr)-1)
	for i, m := range arr[1:] {
		if flat[i], err = m.ToString(); err != nil {
			err = fmt.Errorf("kyu/redis: claim: unexpected reply %s", reply.String())
			return rueidis.NewErrorResult(err), nil, err
		}
	}
	return enq, flat, nil
}

// claimLeanCall is the "claim lean" call on queue q, number num, for the
// claim script's ARGV args (claimArgs) of a claim with no type filter
// and no byte budget: its first four values, then the queue name.
func (s *store) claimLeanCall(num uint32, q string, args []string) call {
	return call{s: s.scripts.claimLean, keys: s.keysOf(s.scripts.claimLean, num), args: []string{args[0], args[1], args[2], args[3], q}}
}

// leftToClaim reports whether a "claim lean" reply leaves the claim to the
// claim script: the empty list.
func leftToClaim(reply rueidis.RedisResult) bool {
	arr, err := reply.ToArray()
	return err == nil && len(arr) == 0
}
