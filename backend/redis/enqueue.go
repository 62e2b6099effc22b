package redis

import (
	"context"
	"fmt"
	"strconv"

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

	type group struct {
		name string
		num  uint32
		pos  []int // positions in p.Jobs
		args []string
	}
	var groups []*group
	byName := map[string]*group{}
	now := p.Now.UnixMilli()
	nowS := strconv.FormatInt(now, 10)
	for i := range p.Jobs {
		nj := &p.Jobs[i]
		g := byName[nj.Queue]
		if g == nil {
			num, _, err := s.queues.number(ctx, nj.Queue, true)
			if err != nil {
				return backend.EnqueueResult{}, err
			}
			g = &group{name: nj.Queue, num: num, args: []string{nowS, s.keys.wakeChannel(nj.Queue), ""}}
			byName[nj.Queue] = g
			groups = append(groups, g)
		}
		id, err := newJobID(g.num)
		if err != nil {
			return backend.EnqueueResult{}, err
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
		g.pos = append(g.pos, i)
		g.args = append(g.args, id, state, score, msOf(j.Deadline), nj.UniqueKey, until, encodeRecord(j))
	}
	calls := make([]call, len(groups))
	for i, g := range groups {
		g.args[2] = strconv.Itoa(len(g.pos))
		calls[i] = call{s: enqueueScript, keys: s.keys.queue(g.num).all(), args: g.args}
	}

	var replies []rueidis.RedisResult
	err := s.retry(ctx, func(int) error {
		replies = s.runEnqueue(ctx, calls)
		for _, r := range replies {
			if err := r.Error(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return backend.EnqueueResult{}, fmt.Errorf("kyu/redis: enqueue: %w", err)
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
