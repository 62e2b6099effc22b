package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/kyuhq/kyu/backend"
	"github.com/redis/rueidis"
)

// readyScore is a pending job's score in its queue's ready set: priority
// first (higher first), then run-at; Redis orders equal scores by member,
// the id, so enqueue order within a millisecond. Exact in a float64:
// 200*2^44 + 2^44 < 2^53.
func readyScore(priority int, runAt int64) string {
	return strconv.FormatInt(int64(backend.MaxPriority-priority)<<44+runAt, 10)
}

// Enqueue writes the jobs of each queue with one script run. A batch
// spanning several queues is one MULTI on a single server; on a Cluster
// each queue's part is atomic on its own (their slots differ).
func (s *Store) Enqueue(ctx context.Context, p backend.EnqueueParams) (backend.EnqueueResult, error) {
	if err := p.Prepare(); err != nil {
		return backend.EnqueueResult{}, err
	}
	if err := s.enter(); err != nil {
		return backend.EnqueueResult{}, err
	}
	defer s.leave()

	var groups []*enqueueGroup
	byName := map[string]*enqueueGroup{}
	for i := range p.Jobs {
		q := p.Jobs[i].Queue
		g := byName[q]
		if g == nil {
			g = &enqueueGroup{name: q}
			byName[q] = g
			groups = append(groups, g)
		}
		g.pos = append(g.pos, i)
	}
	// A group whose queue keys turn out stale (the data was flushed, and
	// the number may belong to another queue now) or unmarked wrote
	// nothing: it asks the registry again and gets new ids; the others
	// keep theirs, so writing them again changes nothing.
	var replies []rueidis.RedisResult
	for try := 0; ; try++ {
		for _, g := range groups {
			if g.args == nil {
				if err := s.buildEnqueue(ctx, g, &p); err != nil {
					return backend.EnqueueResult{}, err
				}
			}
		}
		calls := make([]call, len(groups))
		for i, g := range groups {
			calls[i] = call{s: enqueueScript, keys: s.keys.queue(g.num).all(), args: g.args}
		}
		err := s.retry(ctx, func(int) error {
			replies = s.runEnqueue(ctx, calls)
			for _, r := range replies {
				if err := r.Error(); err != nil && !staleQueue(err) {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return backend.EnqueueResult{}, fmt.Errorf("kyu/redis: enqueue: %w", err)
		}
		stale := false
		for i, r := range replies {
			if err := r.Error(); err != nil {
				stale = true
				s.log.Warn("queue keys not marked as expected; asking the registry again", "queue", groups[i].name, "err", err)
				s.queues.forget(groups[i].name)
				groups[i].args = nil
			}
		}
		if !stale {
			break
		}
		if try == 2 {
			return backend.EnqueueResult{}, fmt.Errorf("kyu/redis: enqueue: %w: queue keys stay unmarked or marked for another queue", ErrCorrupt)
		}
	}

	res := backend.EnqueueResult{Jobs: make([]backend.EnqueuedJob, len(p.Jobs))}
	for gi, g := range groups {
		items, err := replies[gi].ToArray()
		if err != nil || len(items) != len(g.pos) {
			return backend.EnqueueResult{}, fmt.Errorf("kyu/redis: enqueue: unexpected reply %s", replies[gi].String())
		}
		for k, it := range items {
			v, err := it.ToArray()
			if err != nil || len(v) != 3 {
				return backend.EnqueueResult{}, fmt.Errorf("kyu/redis: enqueue: unexpected reply %s", it.String())
			}
			dup, _ := v[0].AsInt64()
			id, _ := v[1].ToString()
			code, _ := v[2].ToString()
			state, ok := stateOfCode(code)
			if !ok {
				return backend.EnqueueResult{}, fmt.Errorf("%w: unique key holder %s has state %q", ErrCorrupt, id, code)
			}
			res.Jobs[g.pos[k]] = backend.EnqueuedJob{ID: id, State: state, Duplicate: dup == 1}
		}
	}
	return res, nil
}

// enqueueGroup is the part of an Enqueue call that goes to one queue.
type enqueueGroup struct {
	name string
	num  uint32
	pos  []int    // positions in EnqueueParams.Jobs
	args []string // the script's ARGV; nil until built
}

// buildEnqueue gives the group's jobs their ids and records.
func (s *Store) buildEnqueue(ctx context.Context, g *enqueueGroup, p *backend.EnqueueParams) error {
	num, _, err := s.queues.number(ctx, g.name, true)
	if err != nil {
		return err
	}
	g.num = num
	nowS := strconv.FormatInt(p.Now.UnixMilli(), 10)
	args := make([]string, 0, 4+7*len(g.pos))
	args = append(args, nowS, s.keys.wakeChannel(g.name), strconv.Itoa(len(g.pos)), g.name)
	for _, i := range g.pos {
		nj := &p.Jobs[i]
		id, err := newJobID(num)
		if err != nil {
			return err
		}
		j := nj.Record(id, p.Now)
		runAt := j.RunAt.UnixMilli()
		state, score := "p", readyScore(j.Priority, runAt)
		if j.State == backend.StateScheduled {
			state, score = "s", strconv.FormatInt(runAt, 10)
		}
		until := "0"
		if nj.UniqueFor > 0 {
			until = strconv.FormatInt(p.Now.Add(nj.UniqueFor).UnixMilli(), 10)
		}
		args = append(args, id, state, score, msOf(j.Deadline), nj.UniqueKey, until, encodeRecord(j))
	}
	g.args = args
	return nil
}

// staleQueue reports whether a script refused to run because its queue's
// keys are not marked as that queue's (see checkQueue in scripts.go).
func staleQueue(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && (strings.HasPrefix(re.Error(), "KYUSTALE") || strings.HasPrefix(re.Error(), "KYUUNMARKED"))
}

// runEnqueue sends the enqueue scripts: one MULTI with every script's
// source when several queues share one server, so the batch is atomic;
// one pipelined round trip otherwise.
func (s *Store) runEnqueue(ctx context.Context, calls []call) []rueidis.RedisResult {
	if len(calls) == 1 || s.opts.Cluster {
		return s.evalMany(ctx, calls)
	}
	cmds := make(rueidis.Commands, 0, len(calls)+2)
	cmds = append(cmds, s.client.B().Multi().Build())
	for _, c := range calls {
		cmds = append(cmds, s.evalCmd(c, true))
	}
	cmds = append(cmds, s.client.B().Exec().Build())
	res := s.client.DoMulti(ctx, cmds...)
	for _, r := range res[:len(res)-1] {
		if err := r.Error(); err != nil {
			return []rueidis.RedisResult{r}
		}
	}
	exec, err := res[len(res)-1].ToArray()
	if err != nil {
		return []rueidis.RedisResult{res[len(res)-1]}
	}
	if len(exec) != len(calls) {
		return []rueidis.RedisResult{rueidis.NewErrorResult(fmt.Errorf("EXEC returned %d replies for %d scripts", len(exec), len(calls)))}
	}
	out := make([]rueidis.RedisResult, len(exec))
	for i, m := range exec {
		out[i] = rueidis.NewResult(m, nil)
	}
	return out
}
