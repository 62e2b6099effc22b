package postgres

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kyuhq/kyu/backend"
)

// Coalescing of Enqueue calls. Each Enqueue outside a caller's transaction
// is a commit of its own, and so waits for a WAL flush; from many
// goroutines, the flushes rather than the statements set the pace. So
// small calls go to the database on their own only while fewer than
// lineCalls of them are on their way; the ones that come meanwhile wait,
// and go together, in one transaction, when one of those returns.
const (
	// lineCalls is how many small Enqueue calls (or coalesced groups of
	// them) are on their way to the database at once.
	lineCalls = 2
	// lineMaxJobs is the most jobs of a call that joins the line; larger
	// calls always go on their own.
	lineMaxJobs = 16
	// lineGroupJobs bounds the jobs of one coalesced group; a caller that
	// would pass it starts the next group.
	lineGroupJobs = 512
)

// enqueueLine coalesces concurrent small Enqueue calls (see lineCalls).
// The zero value is ready to use.
type enqueueLine struct {
	mu      sync.Mutex
	calls   int             // calls and groups on their way
	waiting []*enqueueGroup // groups waiting for their turn, oldest first
}

// enqueueGroup is the calls of several callers that go in one transaction.
// Its fields are guarded by enqueueLine.mu, except err, written before done
// is closed.
type enqueueGroup struct {
	members []*lineMember // in the order they joined
	jobs    int           // of the members that did not leave before the start
	waiting int           // members still waiting for done
	started bool
	cancel  context.CancelFunc // ends the group's context; set at the start
	done    chan struct{}      // closed when the group is written or failed
	err     error
}

// lineMember is one caller of a group.
type lineMember struct {
	ctx  context.Context
	plan *enqueuePlan
	left bool // the caller's ctx ended while it waited
}

// enqueueLined writes plan on its own when fewer than lineCalls small
// calls are on their way, and else with the group that goes next.
//
// The callers of a group are written in one transaction as if one after
// another, in the order they joined: each job with its own caller's clock,
// and a unique key asked for by two callers goes to the first, the second
// seeing a duplicate of the first's job. An error of the group's
// transaction is every member's, and then none of their jobs is written.
// A caller whose ctx ends while it waits returns ctx's error, wrapped: if
// its group had not started, its jobs are left out and not written;
// otherwise they may be (the group goes on for the members still waiting,
// and is cancelled when none is).
func (s *store) enqueueLined(ctx context.Context, plan *enqueuePlan) (backend.EnqueueResult, error) {
	l := &s.line
	l.mu.Lock()
	if l.calls < lineCalls && len(l.waiting) == 0 {
		l.calls++
		l.mu.Unlock()
		res, err := s.enqueueAlone(ctx, plan)
		s.lineDone()
		return res, err
	}
	var g *enqueueGroup
	if n := len(l.waiting); n > 0 && l.waiting[n-1].jobs+len(plan.jobs) <= lineGroupJobs {
		g = l.waiting[n-1]
	} else {
		g = &enqueueGroup{done: make(chan struct{})}
		l.waiting = append(l.waiting, g)
	}
	m := &lineMember{ctx: ctx, plan: plan}
	g.members = append(g.members, m)
	g.jobs += len(plan.jobs)
	g.waiting++
	l.mu.Unlock()

	select {
	case <-g.done:
		return g.result(plan)
	case <-ctx.Done():
	}
	l.mu.Lock()
	select {
	case <-g.done:
		l.mu.Unlock()
		return g.result(plan)
	default:
	}
	m.left = true
	g.waiting--
	started := g.started
	if !started {
		g.jobs -= len(plan.jobs)
	} else if g.waiting == 0 {
		g.cancel()
	}
	l.mu.Unlock()
	if started {
		return backend.EnqueueResult{}, fmt.Errorf("kyu/postgres: enqueue: left a shared transaction under way, which may still write the jobs: %w", ctx.Err())
	}
	return backend.EnqueueResult{}, fmt.Errorf("kyu/postgres: enqueue: waiting for a shared transaction (the jobs are not written): %w", ctx.Err())
}

// result is a member's outcome once done is closed.
func (g *enqueueGroup) result(plan *enqueuePlan) (backend.EnqueueResult, error) {
	if g.err != nil {
		return backend.EnqueueResult{}, g.err
	}
	return plan.result(), nil
}

// lineDone ends a call or group on its way: the oldest waiting group, if
// any, takes its place.
func (s *store) lineDone() {
	l := &s.line
	l.mu.Lock()
	if len(l.waiting) == 0 {
		l.calls--
		l.mu.Unlock()
		return
	}
	g := l.waiting[0]
	l.waiting[0] = nil
	l.waiting = l.waiting[1:]
	if len(l.waiting) == 0 {
		l.waiting = nil
	}
	g.started = true
	var plans []*enqueuePlan
	base := context.Background()
	for _, m := range g.members {
		if m.left {
			continue
		}
		if plans == nil {
			base = m.ctx
		}
		plans = append(plans, m.plan)
	}
	// The group outlives any one member's ctx (its values are the first
	// member's): it is cancelled when no member waits for it any more.
	ctx, cancel := context.WithCancel(context.WithoutCancel(base))
	g.cancel = cancel
	l.mu.Unlock()
	go s.runGroup(ctx, g, plans)
}

// runGroup writes a group's plans, notifies the queues that got pending
// jobs, releases the members and passes the turn on.
func (s *store) runGroup(ctx context.Context, g *enqueueGroup, plans []*enqueuePlan) {
	defer s.lineDone()
	defer g.cancel()
	switch len(plans) {
	case 0: // every member left before the start
	case 1:
		_, g.err = s.enqueueAlone(ctx, plans[0])
	default:
		var filled map[string]bool
		if filled, g.err = s.writeGroup(ctx, plans); g.err == nil {
			var pending []string
			for _, p := range plans {
				for _, q := range p.pendingQueues(filled) {
					if !slices.Contains(pending, q) {
						pending = append(pending, q)
					}
				}
			}
			s.notifyPending(pending)
		}
	}
	close(g.done)
	// Let the members just released come back before the next group
	// starts (lineDone, deferred): producers that enqueue in a loop then
	// join it, rather than the one after, and groups do not alternate
	// between full and nearly empty.
	runtime.Gosched()
}

// writeGroup writes the plans of several callers atomically: with one
// INSERT when none takes a unique key or has a JID, else in a
// transaction; that transaction also fills the claims waiting for their
// jobs (fillclaim.go), and filled names the jobs they took.
func (s *store) writeGroup(ctx context.Context, plans []*enqueuePlan) (filled map[string]bool, err error) {
	op := fmt.Sprintf("enqueue (%d calls coalesced)", len(plans))
	if ws := s.takeWaiting(plans); ws != nil {
		if filled, done, err := s.enqueueFilling(ctx, op, plans, ws); done {
			return filled, err
		}
	}
	keyed := slices.ContainsFunc(plans, func(p *enqueuePlan) bool { return len(p.keyed) > 0 || p.hasJID })
	if !keyed {
		return nil, s.wrap(op, s.enqueueGroupIn(ctx, pgxRunner{s.pool}, plans))
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	err = s.enqueueGroupIn(ctx, pgxRunner{tx}, plans)
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		tx.Rollback(ctx) //nolint:errcheck // the first error is the one to report
		return nil, s.wrap(op, err)
	}
	return nil, nil
}

// groupItem is item i of plan, in a coalesced group.
type groupItem struct {
	plan *enqueuePlan
	i    int
}

// enqueueGroupIn checks the JIDs of the plans, takes their unique keys
// and writes their new jobs within one transaction r, with the outcome of
// running the plans one after another in order.
//
// A key asked for by several plans is asked for in layers: the first
// plan's item in the first takeKeysAt, the second's in the next, and so on,
// with the jobs that took keys in a layer inserted before the next
// (take_unique_key reads the holder's job to tell whether it still lives).
// Each layer's items are in key order, and a later layer only asks for keys
// whose rows an earlier one locked, so concurrent groups lock keys in one
// order. Without shared keys, that is one takeKeysAt and one INSERT.
func (s *store) enqueueGroupIn(ctx context.Context, r runner, plans []*enqueuePlan) error {
	if err := s.takeJIDs(ctx, r, plans); err != nil {
		return err
	}
	var layers [][]groupItem
	seen := map[[2]string]int{}
	for _, p := range plans {
		for _, i := range p.keyed {
			j := p.jobs[i]
			k := [2]string{j.Queue, j.UniqueKey}
			n := seen[k]
			seen[k] = n + 1
			if n == len(layers) {
				layers = append(layers, nil)
			}
			layers[n] = append(layers[n], groupItem{p, i})
		}
	}
	written := map[*backend.Job]bool{}
	for n, layer := range layers {
		if err := s.takeKeysAt(ctx, r, layer); err != nil {
			return err
		}
		if n == len(layers)-1 {
			break
		}
		var took []groupItem
		for _, it := range layer {
			if !it.plan.res[it.i].Duplicate {
				took = append(took, it)
				written[it.plan.jobs[it.i]] = true
			}
		}
		if err := s.insertAt(ctx, r, took); err != nil {
			return err
		}
	}
	var rest []groupItem
	for _, p := range plans {
		p.settle()
		for _, i := range p.fresh() {
			if !written[p.jobs[i]] {
				rest = append(rest, groupItem{p, i})
			}
		}
	}
	return s.insertAt(ctx, r, rest)
}

// takeKeysAt takes the unique keys of items, which are of distinct keys,
// in one statement, each at its plan's clock, marking the items whose key
// was held as duplicates.
func (s *store) takeKeysAt(ctx context.Context, r runner, items []groupItem) error {
	slices.SortFunc(items, func(a, b groupItem) int {
		ja, jb := a.plan.jobs[a.i], b.plan.jobs[b.i]
		return cmp.Or(cmp.Compare(ja.Queue, jb.Queue), cmp.Compare(ja.UniqueKey, jb.UniqueKey))
	})
	n := len(items)
	idx := make([]int32, n)
	queues, keys, ids := make([]string, n), make([]string, n), make([]string, n)
	until, now := make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
	for k, it := range items {
		j := it.plan.jobs[it.i]
		idx[k], queues[k], keys[k], ids[k], now[k] = int32(k), j.Queue, j.UniqueKey, j.ID, it.plan.now
		if j.UniqueFor > 0 {
			until[k] = pgtype.Timestamptz{Time: j.CreatedAt.Add(j.UniqueFor), Valid: true}
		}
	}
	return r.run(ctx, s.sqls.takeKeysAt, []any{idx, queues, keys, ids, until, now}, func(scan func(...any) error) error {
		var k int32
		var holder, state pgtype.Text
		if err := scan(&k, &holder, &state); err != nil {
			return err
		}
		if k < 0 || int(k) >= n {
			return fmt.Errorf("unique keys: item %d out of range", k)
		}
		if holder.Valid {
			it := items[k]
			it.plan.res[it.i] = backend.EnqueuedJob{ID: holder.String, State: backend.State(state.String), Duplicate: true}
		}
		return nil
	})
}

// insertAt writes the jobs of items with one INSERT, each created at its
// plan's clock.
func (s *store) insertAt(ctx context.Context, r runner, items []groupItem) error {
	if len(items) == 0 {
		return nil
	}
	rows := make([][]any, len(items))
	created := make([]pgtype.Timestamptz, len(items))
	for k, it := range items {
		row, err := insertRow(it.plan.jobs[it.i])
		if err != nil {
			return fmt.Errorf("job %d: %w", it.i, err)
		}
		rows[k], created[k] = row, it.plan.now
	}
	args := append(columns(rows), created) // $18
	return r.run(ctx, s.sqls.insertAt, args, func(scan func(...any) error) error { return nil })
}
