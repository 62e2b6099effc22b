package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/redis/rueidis"
)

// appendReadyScore appends a pending job's score in its queue's ready
// set: priority first (higher first), then run-at; Redis orders equal
// scores by member, the id, so enqueue order within a millisecond. Exact
// in a float64: 200*2^44 + 2^44 < 2^53.
func appendReadyScore(b []byte, priority int, runAt int64) []byte {
	return strconv.AppendInt(b, int64(backend.MaxPriority-priority)<<44+runAt, 10)
}

// Enqueue writes the jobs of each queue with one script run. A batch
// spanning several queues is one MULTI on a single server; on a Cluster
// each queue's part is atomic on its own (their slots differ). A single
// job may share its script run with other callers' (enqueueOne). A batch
// that names one JID in several queues goes in turns (jidsLater), and one
// with JIDs on a Cluster reserves them first (jid.go).
func (s *store) Enqueue(ctx context.Context, p backend.EnqueueParams) (backend.EnqueueResult, error) {
	if err := s.enter(); err != nil {
		return backend.EnqueueResult{}, err
	}
	defer s.leave()
	if hasJID(p.Jobs) {
		if s.keys.cluster {
			return s.enqueueClusterJIDs(ctx, p)
		}
		if later := jidsLater(p.Jobs); later != nil {
			return s.enqueueInTurn(ctx, p, later)
		}
	}
	if len(p.Jobs) == 1 {
		return s.enqueueOne(ctx, p)
	}
	return s.enqueue(ctx, p, nil, false)
}

// enqueue writes prepared jobs; nows, when not nil, holds each job's own
// clock (jobs of several callers coalesced into one call), and p.Now is
// then the latest of them. own marks a run of single enqueues
// (coalesce.go), which goes on a connection of its own when one is free
// (runconn.go).
func (s *store) enqueue(ctx context.Context, p backend.EnqueueParams, nows []time.Time, own bool) (backend.EnqueueResult, error) {
	res, elsewhere, err := s.enqueueOnce(ctx, p, nows, own)
	if err == nil && len(elsewhere) > 0 {
		err = s.holderStates(ctx, p, nows, res.Jobs, elsewhere)
	}
	if err != nil {
		return backend.EnqueueResult{}, err
	}
	return res, nil
}

// enqueueOnce is enqueue but for the jobs whose JID the script found held
// by a job of another queue (or by one gone): it lists their positions,
// and their items name the holder's id only (holderStates).
func (s *store) enqueueOnce(ctx context.Context, p backend.EnqueueParams, nows []time.Time, own bool) (backend.EnqueueResult, []int, error) {
	// Room for one group, most calls: on the stack, not the heap.
	groups := make([]*enqueueGroup, 0, 1)
	byName := map[string]*enqueueGroup{}
	for i := range p.Jobs {
		q := p.Jobs[i].Queue
		g := byName[q]
		if g == nil {
			g = &enqueueGroup{name: q}
			if len(groups) == 0 {
				// Most calls name one queue: its group takes every job
				// (a lone job's position in the group's own room).
				g.pos = g.oneJob.pos[:0]
				if len(p.Jobs) > 1 {
					g.pos = make([]int, 0, len(p.Jobs))
				}
				if nows != nil {
					g.nows = make([]time.Time, 0, len(p.Jobs))
				}
			}
			byName[q] = g
			groups = append(groups, g)
		}
		g.pos = append(g.pos, i)
		if nows != nil {
			g.nows = append(g.nows, nows[i])
		}
	}
	// A group whose queue keys turn out stale (the data was flushed, and
	// the number may belong to another queue now) or unmarked wrote
	// nothing: it asks the registry again and gets new ids; the others
	// keep theirs, so writing them again changes nothing.
	var replies []rueidis.RedisResult
	// callsBuf and one hold a call of one group, most calls, and the
	// reply of one on a connection of its own: on the stack, not the heap.
	var callsBuf [1]call
	var one [1]rueidis.RedisResult
	for try := 0; ; try++ {
		for _, g := range groups {
			if g.args == nil {
				if err := s.buildEnqueue(ctx, g, &p); err != nil {
					return backend.EnqueueResult{}, nil, err
				}
			}
		}
		calls := callsBuf[:]
		if len(groups) > 1 {
			calls = make([]call, len(groups))
		}
		for i, g := range groups {
			sc, args := s.scripts.enqueue, g.args
			switch {
			case g.jids:
				sc = s.scripts.enqueueJID
			case g.lean:
				sc, args = s.scripts.enqueueLean, g.leanArgs()
			}
			calls[i] = call{s: sc, keys: s.keysOf(sc, g.num), args: args}
		}
		first := groups[0] // not groups, which the closure would move to the heap
		err := s.retry(ctx, func(int) error {
			if len(calls) == 1 {
				one[0] = s.runEnqueueOne(ctx, calls[0], first, own)
				replies = one[:]
			} else {
				replies = s.runEnqueue(ctx, calls, groups)
			}
			for _, r := range replies {
				if err := r.Error(); err != nil && !staleQueue(err) {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return backend.EnqueueResult{}, nil, fmt.Errorf("kyu/redis: enqueue: %w", err)
		}
		again := false
		for i, r := range replies {
			g := groups[i]
			if err := r.Error(); err != nil {
				again = true
				s.log.Warn("queue keys not marked as expected; asking the registry again", "queue", g.name, "err", err)
				s.queues.forget(g.name)
				g.args = nil
				continue
			}
			collided, err := g.collisions(r)
			if err != nil {
				return backend.EnqueueResult{}, nil, err
			}
			for _, k := range collided {
				// Another job has this id (38 random bits and the clock
				// coincided): give this one a new id and run the group
				// again; its jobs already written are reported as written.
				again = true
				s.log.Warn("job id collision; enqueueing with a new id", "queue", g.name)
				if err := g.setJob(k, &p); err != nil {
					return backend.EnqueueResult{}, nil, err
				}
			}
		}
		if !again {
			break
		}
		if try == 4 {
			return backend.EnqueueResult{}, nil, fmt.Errorf("kyu/redis: enqueue: %w: queue keys stay unmarked or marked for another queue, or job ids keep colliding", ErrCorrupt)
		}
	}

	res := backend.EnqueueResult{Jobs: make([]backend.EnqueuedJob, len(p.Jobs))}
	var elsewhere []int // jobs whose JID a job of another queue holds
	for gi, g := range groups {
		items, asked, err := g.replyItems(replies[gi])
		if err != nil {
			return backend.EnqueueResult{}, nil, err
		}
		for k := range g.pos {
			if asked {
				res.Jobs[g.pos[k]] = g.written(k)
				continue
			}
			it := items[k]
			if it.IsInt64() {
				if code, _ := it.AsInt64(); code != 0 {
					return backend.EnqueueResult{}, nil, fmt.Errorf("kyu/redis: enqueue: unexpected reply %s", it.String())
				}
				res.Jobs[g.pos[k]] = g.written(k)
				continue
			}
			v, err := it.ToArray()
			if err == nil && len(v) == 2 {
				if code, _ := v[0].AsInt64(); code == 3 {
					id, _ := v[1].ToString()
					res.Jobs[g.pos[k]] = backend.EnqueuedJob{ID: id, Duplicate: true}
					elsewhere = append(elsewhere, g.pos[k])
					continue
				}
			}
			if err != nil || len(v) != 3 {
				return backend.EnqueueResult{}, nil, fmt.Errorf("kyu/redis: enqueue: unexpected reply %s", it.String())
			}
			if code, _ := v[0].AsInt64(); code != 1 {
				return backend.EnqueueResult{}, nil, fmt.Errorf("kyu/redis: enqueue: unexpected reply %s", it.String())
			}
			id, _ := v[1].ToString()
			code, _ := v[2].ToString()
			state, ok := stateOfCode(code)
			if !ok {
				return backend.EnqueueResult{}, nil, fmt.Errorf("%w: unique key holder %s has state %q", ErrCorrupt, id, code)
			}
			res.Jobs[g.pos[k]] = backend.EnqueuedJob{ID: id, State: state, Duplicate: true}
		}
	}
	return res, elsewhere, nil
}

// enqueueGroup is the part of an Enqueue call that goes to one queue.
type enqueueGroup struct {
	name string
	num  uint32
	pos  []int    // positions in EnqueueParams.Jobs
	args []string // the script's ARGV; nil until built
	// nows holds each job's clock when the jobs come from several callers
	// (nil: EnqueueParams.Now for all).
	nows []time.Time
	// jids is set when a job of the group has a JID: args then end with
	// one JID per job (see lua/enqueue.lua).
	jids bool
	// lean is set when every job of the group is pending, with no
	// deadline, unique key or JID: the group's call then runs "enqueue
	// lean", which takes only the keys such jobs touch.
	lean bool
	// short is set when the store writes short headers (store.short).
	short bool
	// oneJob is the room of pos, args and leanArgs's result for a group
	// of one job without a JID, most calls: three allocations fewer.
	oneJob struct {
		pos  [1]int
		args [enqueueHead + enqueueStride]string
		lean [leanHead + leanStride + 1]string
	}
}

// buildEnqueue gives the group's jobs their ids and records.
func (s *store) buildEnqueue(ctx context.Context, g *enqueueGroup, p *backend.EnqueueParams) error {
	num, _, err := s.queues.number(ctx, g.name, true)
	if err != nil {
		return err
	}
	g.num, g.short = num, s.short
	n := enqueueHead + enqueueStride*len(g.pos)
	g.jids = false
	for _, i := range g.pos {
		if p.Jobs[i].JID != "" {
			g.jids = true
			break
		}
	}
	if g.jids {
		n += len(g.pos) // one JID per job after the jobs' values
	}
	g.lean = !g.jids // setJob clears it for a job that needs more keys
	if n <= len(g.oneJob.args) {
		g.args = g.oneJob.args[:n]
		clear(g.args)
	} else {
		g.args = make([]string, n)
	}
	g.args[2], g.args[3] = strconv.Itoa(len(g.pos)), g.name
	for k := range g.pos {
		if err := g.setJob(k, p); err != nil {
			return err
		}
	}
	if !g.lean {
		// Whether a group is lean depends on its jobs' options, not their
		// ids, so a new id (setJob again) leaves it as it is.
		g.setHead(s.keys, p.Now)
	}
	return nil
}

// setHead writes the values ahead of the jobs in args that the enqueue
// script takes and "enqueue lean" does not (leanArgs): the clock and the
// wake channel. A lean group goes without: two allocations of a lone
// call's 21.
func (g *enqueueGroup) setHead(k keys, now time.Time) {
	g.args[0], g.args[1] = strconv.FormatInt(now.UnixMilli(), 10), k.wakeChannel(g.name)
}

// leanArgs is the ARGV of "enqueue lean" (lua/enqueue_lean.lua) for the
// group's jobs, picked from args: the queue name, then per job its id,
// score and record.
func (g *enqueueGroup) leanArgs() []string {
	// One more in capacity: for leanQuiet, should a waiting claim take
	// the call (enqueueHandoff). The command built from it copies it, so
	// for a lone job it may be the group's own room, which the next try
	// writes again.
	n := leanHead + leanStride*len(g.pos)
	var out []string
	if n < len(g.oneJob.lean) {
		out = g.oneJob.lean[: n : n+1]
	} else {
		out = make([]string, n, n+1)
	}
	out[0] = g.args[3]
	for k := range g.pos {
		a := g.args[enqueueHead+k*enqueueStride:]
		out[1+3*k], out[2+3*k], out[3+3*k] = a[0], a[2], a[6]
	}
	return out
}

// The ARGV of "enqueue lean": leanHead values, then leanStride per job.
const (
	leanHead   = 1
	leanStride = 3
)

// The enqueue script's ARGV: enqueueHead values, then enqueueStride per job.
const (
	enqueueHead   = 4
	enqueueStride = 7
)

// setJob gives the group's k-th job a new id and writes its ARGV values.
// The id is made first, since the record holds its time; the score, the
// times and the record are then written into one buffer, on the stack
// when they fit, and made one string whose parts are the ARGV values:
// two allocations a job, not four.
func (g *enqueueGroup) setJob(k int, p *backend.EnqueueParams) error {
	nj := &p.Jobs[g.pos[k]]
	u, err := newJobUUID(g.num)
	if err != nil {
		return err
	}
	now := p.Now
	if g.nows != nil {
		now = g.nows[k]
	}
	j := newRecord(nj, "", now)
	var idBuf [36]byte
	j.ID = string(appendID(idBuf[:0], u))
	var stack [512]byte
	buf := stack[:0]
	if n := 3*20 + recordSize(&j); n > len(stack) {
		buf = make([]byte, 0, n)
	}
	runAt := j.RunAt.UnixMilli()
	state := "p"
	if j.State == backend.StateScheduled {
		state = "s"
		buf = strconv.AppendInt(buf, runAt, 10)
	} else {
		buf = appendReadyScore(buf, j.Priority, runAt)
	}
	scoreEnd := len(buf)
	if !j.Deadline.IsZero() {
		buf = strconv.AppendInt(buf, j.Deadline.UnixMilli(), 10)
	}
	deadlineEnd := len(buf)
	if nj.UniqueFor > 0 {
		buf = strconv.AppendInt(buf, now.Add(nj.UniqueFor).UnixMilli(), 10)
	}
	untilEnd := len(buf)
	buf = appendRecord(buf, &j, g.short)
	all := string(buf)
	score, deadline, until := all[:scoreEnd], all[scoreEnd:deadlineEnd], "0"
	if nj.UniqueFor > 0 {
		until = all[deadlineEnd:untilEnd]
	}
	if state != "p" || deadline != "" || nj.UniqueKey != "" {
		g.lean = false
	}
	a := g.args[enqueueHead+k*enqueueStride:]
	a[0], a[1], a[2], a[3], a[4], a[5], a[6] = j.ID, state, score, deadline, nj.UniqueKey, until, all[untilEnd:]
	if g.jids {
		g.args[enqueueHead+len(g.pos)*enqueueStride+k] = nj.JID
	}
	return nil
}

// newRecord is nj.Record(id, now) without its copies of the payload, tags
// and metadata: the job is only encoded, and its slices and map are the
// caller's.
func newRecord(nj *backend.NewJob, id string, now time.Time) backend.Job {
	runAt, state := nj.RunAt, backend.StatePending
	if runAt.IsZero() || !runAt.After(now) {
		runAt = now
	} else {
		state = backend.StateScheduled
	}
	return backend.Job{
		ID: id, Type: nj.Type, Queue: nj.Queue, Payload: nj.Payload, Title: nj.Title, Priority: nj.Priority,
		State: state, MaxAttempts: nj.MaxAttempts, RunAt: runAt, Timeout: nj.Timeout, Deadline: nj.Deadline,
		UniqueKey: nj.UniqueKey, UniqueFor: nj.UniqueFor, JID: nj.JID, Tags: nj.Tags, Metadata: nj.Metadata,
		Retention: nj.Retention, CreatedAt: now,
	}
}

// written is the outcome of the group's k-th job written as asked: its own
// id and state.
func (g *enqueueGroup) written(k int) backend.EnqueuedJob {
	a := g.args[enqueueHead+k*enqueueStride:]
	state := backend.StatePending
	if a[1] == "s" {
		state = backend.StateScheduled
	}
	return backend.EnqueuedJob{ID: a[0], State: state}
}

// replyItems reads the enqueue script's reply for the group: asked is
// true when every job was written as asked (the script's bare 0);
// otherwise items has one entry per job.
func (g *enqueueGroup) replyItems(reply rueidis.RedisResult) (items []rueidis.RedisMessage, asked bool, err error) {
	if code, err := reply.AsInt64(); err == nil && code == 0 {
		return nil, true, nil
	}
	items, err = reply.ToArray()
	if err != nil || len(items) != len(g.pos) {
		return nil, false, unexpectedReply(reply)
	}
	return items, false, nil
}

// unexpectedReply is the error of an enqueue script's reply that is not
// of its shape. Apart, so that only a call that fails copies the reply to
// the heap (its String takes a pointer): replyItems did at every call.
func unexpectedReply(reply rueidis.RedisResult) error {
	return fmt.Errorf("kyu/redis: enqueue: unexpected reply %s", reply.String())
}

// collisions lists the jobs of the group whose ids the script found taken.
func (g *enqueueGroup) collisions(reply rueidis.RedisResult) ([]int, error) {
	items, asked, err := g.replyItems(reply)
	if err != nil || asked {
		return nil, err
	}
	var out []int
	for k, it := range items {
		if it.IsInt64() {
			switch code, _ := it.AsInt64(); code {
			case 0:
			case 2:
				out = append(out, k)
			default:
				return nil, fmt.Errorf("kyu/redis: enqueue: unexpected reply %s", it.String())
			}
			continue
		}
		if v, err := it.ToArray(); err != nil || len(v) != 3 && len(v) != 2 {
			return nil, fmt.Errorf("kyu/redis: enqueue: unexpected reply %s", it.String())
		}
	}
	return out, nil
}

// staleQueue reports whether a script refused to run because its queue's
// keys are not marked as that queue's (see checkQueue in lua/common.lua).
func staleQueue(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && (strings.HasPrefix(re.Error(), "KYUSTALE") || strings.HasPrefix(re.Error(), "KYUUNMARKED"))
}

// runEnqueue sends the enqueue scripts of groups: one MULTI with every
// script's source when several queues share one server, so the batch is
// atomic; one pipelined round trip otherwise. Behind the MULTI's EXEC, in
// the same write, go the claims of the waiting claims the batch fills
// (handoff.go); the block is then not abandoned for ctx, as
// enqueueHandoff's pair is not.
func (s *store) runEnqueue(ctx context.Context, calls []call, groups []*enqueueGroup) []rueidis.RedisResult {
	if len(calls) == 1 || s.opts.Cluster {
		return s.evalMany(ctx, calls)
	}
	ws, at := s.takeHandoffs(groups)
	cmds := make(rueidis.Commands, 0, len(calls)+2+len(ws))
	cmds = append(cmds, s.client.B().Multi().Build())
	for _, c := range calls {
		cmds = append(cmds, s.evalCmd(c, true))
	}
	cmds = append(cmds, s.client.B().Exec().Build())
	var ps []backend.ClaimParams
	if len(ws) > 0 {
		ctx = context.WithoutCancel(ctx)
		ps = make([]backend.ClaimParams, len(ws))
		for i, w := range ws {
			var cc call
			cc, ps[i] = s.handoffCall(groups[at[i]], w)
			cmds = append(cmds, s.scriptCmd(cc))
		}
	}
	res := s.client.DoMulti(ctx, cmds...)
	out := execReplies(res[:len(calls)+2], len(calls))
	filled := false
	for i, w := range ws {
		failed := len(out) != len(calls) || out[at[i]].Error() != nil
		f := s.handoffAnswer(groups[at[i]], ps[i], res[len(calls)+2+i], failed)
		filled = filled || len(f.res.Jobs) > 0
		s.handoffs.fill(w, f)
	}
	yieldToFilled(filled)
	return out
}

// execReplies are the replies of n scripts sent in a MULTI block, from the
// block's replies (MULTI, one per script, EXEC): one per script, or a
// single error.
func execReplies(res []rueidis.RedisResult, n int) []rueidis.RedisResult {
	for _, r := range res[:len(res)-1] {
		if err := r.Error(); err != nil {
			return []rueidis.RedisResult{r}
		}
	}
	exec, err := res[len(res)-1].ToArray()
	if err != nil {
		return []rueidis.RedisResult{res[len(res)-1]}
	}
	if len(exec) != n {
		return []rueidis.RedisResult{rueidis.NewErrorResult(fmt.Errorf("EXEC returned %d replies for %d scripts", len(exec), n))}
	}
	out := make([]rueidis.RedisResult, len(exec))
	for i, m := range exec {
		out[i] = rueidis.NewResult(m, nil)
	}
	return out
}
