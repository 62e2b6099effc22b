package redis

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kyuhq/kyu/backend"
	"github.com/redis/rueidis"
)

// List pages through jobs in id order. Each (queue, state) pair is a
// source of ids in id order: the state's in set for scheduled, retry and
// final jobs (a ZRANGE BYLEX from the cursor); for pending and active
// jobs, which have no such set (keys.go), the whole ready or leases set,
// sorted here, so listing pending jobs costs O(pending jobs) a page. The
// sources are merged here, every queue's and state's, and the page's
// records read with one script per queue. A job listed under a state it
// has left meanwhile is dropped, and one already on the page is not
// listed twice.
//
// The type and search filters read records in id order and keep the
// matching ones: their cost grows with the jobs passed over, with no
// bound but the end of the listing.
func (s *store) List(ctx context.Context, p backend.ListParams) (backend.ListResult, error) {
	after := p.After()
	if err := s.enter(); err != nil {
		return backend.ListResult{}, err
	}
	defer s.leave()
	queues := map[string]uint32{}
	if p.Queue != "" {
		num, ok, err := s.queues.number(ctx, p.Queue, false)
		if err != nil {
			return backend.ListResult{}, err
		}
		if !ok {
			return backend.ListResult{}, nil
		}
		queues[p.Queue] = num
	} else {
		var err error
		if queues, err = s.queues.all(ctx); err != nil {
			return backend.ListResult{}, err
		}
	}
	states := backend.States()
	if p.State != "" {
		states = []backend.State{p.State}
	}
	m := &merger{s: s, newest: p.Order == backend.NewestFirst, after: after}
	for name, num := range queues {
		for _, st := range states {
			m.srcs = append(m.srcs, &listSource{queue: name, num: num, code: stateCode(st)})
		}
	}
	batch := p.Limit + 1
	if p.Type != "" || p.Tag != "" || p.Search != "" {
		batch = max(batch, 200)
	}
	var page []*backend.Job
	seen := map[string]bool{}
	for len(page) <= p.Limit {
		ids, err := m.next(ctx, batch)
		if err != nil {
			return backend.ListResult{}, err
		}
		if len(ids) == 0 {
			break
		}
		jobs, err := s.listed(ctx, ids)
		if err != nil {
			return backend.ListResult{}, err
		}
		for _, j := range jobs {
			if j != nil && !seen[j.ID] && p.Matches(j) {
				seen[j.ID] = true
				page = append(page, j)
			}
		}
	}
	var res backend.ListResult
	if len(page) > p.Limit {
		page = page[:p.Limit]
		res.NextCursor = p.NextCursor(page[len(page)-1].ID)
	}
	res.Jobs = page
	return res, nil
}

// listSource is one queue's jobs in one state, read in id order.
type listSource struct {
	queue string
	num   uint32
	code  string
	buf   []string // ids read and not yet taken, in listing order
	last  string   // the last id read ("" for none yet)
	done  bool     // nothing more to read
}

// merger merges the sources in id order, from after on.
type merger struct {
	s      *store
	srcs   []*listSource
	newest bool
	after  string
}

// before reports whether id a comes before id b in the listing.
func (m *merger) before(a, b string) bool {
	if m.newest {
		return a > b
	}
	return a < b
}

// next returns up to n ids, in listing order, after those returned so far.
func (m *merger) next(ctx context.Context, n int) ([]string, error) {
	var out []string
	for len(out) < n {
		if err := m.fill(ctx, n); err != nil {
			return nil, err
		}
		var best *listSource
		for _, src := range m.srcs {
			if len(src.buf) > 0 && (best == nil || m.before(src.buf[0], best.buf[0])) {
				best = src
			}
		}
		if best == nil {
			break
		}
		out = append(out, best.buf[0])
		best.buf = best.buf[1:]
	}
	return out, nil
}

// fill reads, in one round trip, the next n ids of every source whose
// buffer is empty.
func (m *merger) fill(ctx context.Context, n int) error {
	var want []*listSource
	for _, src := range m.srcs {
		if len(src.buf) == 0 && !src.done {
			want = append(want, src)
		}
	}
	if len(want) == 0 {
		return nil
	}
	s := m.s
	var res []rueidis.RedisResult
	err := s.retry(ctx, func(int) error {
		cmds := make(rueidis.Commands, len(want))
		for i, src := range want {
			cmds[i] = m.cmd(src, n)
		}
		res = s.client.DoMulti(ctx, cmds...)
		for _, r := range res {
			if err := r.Error(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("kyu/redis: list: %w", err)
	}
	for i, src := range want {
		ids, err := res[i].AsStrSlice()
		if err != nil {
			return fmt.Errorf("kyu/redis: list: unexpected reply %s", res[i].String())
		}
		if hasInSet(src.code) {
			src.buf = ids
			src.done = len(ids) < n
		} else {
			// The whole ready or leases set: keep what follows the cursor.
			src.buf = ids[:0]
			for _, id := range ids {
				if id != leaseAnchor && (m.after == "" || m.before(m.after, id)) {
					src.buf = append(src.buf, id)
				}
			}
			slices.SortFunc(src.buf, func(a, b string) int {
				if m.newest {
					return strings.Compare(b, a)
				}
				return strings.Compare(a, b)
			})
			src.done = true
		}
		if len(src.buf) > 0 {
			src.last = src.buf[len(src.buf)-1]
		}
	}
	return nil
}

// cmd reads the next n ids of a source.
func (m *merger) cmd(src *listSource, n int) rueidis.Completed {
	b := m.s.client.B()
	qk := m.s.keys.queue(src.num)
	switch src.code {
	case "p":
		return b.Zrange().Key(qk.ready()).Min("0").Max("-1").Build()
	case "a":
		return b.Zrange().Key(qk.leases()).Min("0").Max("-1").Build()
	}
	from := cmp.Or(src.last, m.after)
	if m.newest {
		start := "+"
		if from != "" {
			start = "(" + from
		}
		return b.Zrange().Key(qk.in(src.code)).Min(start).Max("-").Bylex().Rev().Limit(0, int64(n)).Build()
	}
	start := "-"
	if from != "" {
		start = "(" + from
	}
	return b.Zrange().Key(qk.in(src.code)).Min(start).Max("+").Bylex().Limit(0, int64(n)).Build()
}

// listed reads the jobs of ids (one script per queue, in one round trip),
// in the order of ids; a job deleted meanwhile, or whose record does not
// parse, is nil. Listed jobs carry no payload, result or log lines.
func (s *store) listed(ctx context.Context, ids []string) ([]*backend.Job, error) {
	type group struct {
		num   uint32
		queue string
		pos   []int
		ids   []string
	}
	var groups []*group
	byNum := map[uint32]*group{}
	for i, id := range ids {
		num, queue, ok, err := s.jobQueue(ctx, id)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		g := byNum[num]
		if g == nil {
			g = &group{num: num, queue: queue}
			byNum[num] = g
			groups = append(groups, g)
		}
		g.pos = append(g.pos, i)
		g.ids = append(g.ids, id)
	}
	out := make([]*backend.Job, len(ids))
	if len(groups) == 0 {
		return out, nil
	}
	var replies []rueidis.RedisResult
	err := s.retry(ctx, func(int) error {
		calls := make([]call, len(groups))
		for i, g := range groups {
			calls[i] = call{s: s.scripts.list, keys: s.keysOf(s.scripts.list, g.num), args: g.ids}
		}
		replies = s.evalMany(ctx, calls)
		for _, r := range replies {
			if err := r.Error(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kyu/redis: list: %w", err)
	}
	for gi, g := range groups {
		v, err := replies[gi].ToArray()
		if err != nil || len(v) != 8*len(g.ids) {
			return nil, fmt.Errorf("kyu/redis: list: unexpected reply %s", replies[gi].String())
		}
		for k, id := range g.ids {
			j, err := jobOfView(id, g.queue, v[8*k+1:8*k+8])
			if err != nil {
				// One record edited into nonsense must not hide the rest
				// of the listing; Get reports it.
				s.log.Error("listing skips a job whose record does not parse", "id", id, "queue", g.queue, "err", err)
				continue
			}
			if j != nil {
				j.Payload = nil
			}
			out[g.pos[k]] = j
		}
	}
	// A job not found where its id points may be an imported one that
	// lives elsewhere (see Import).
	for _, g := range groups {
		for k, id := range g.ids {
			if out[g.pos[k]] != nil {
				continue
			}
			num, queue, ok, err := s.elsewhere(ctx, id, g.num)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			reply, err := s.runOne(ctx, "list "+id, num, s.scripts.get, []string{id})
			if err != nil {
				return nil, err
			}
			if code, j, _, err := viewReply("list", id, queue, reply); err == nil && code == 0 {
				j.Payload, j.Result, j.Logs = nil, nil, nil
				out[g.pos[k]] = j
			}
		}
	}
	return out, nil
}
