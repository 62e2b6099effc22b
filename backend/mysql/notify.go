package mysql

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// signals carries wake-ups, as MySQL has no LISTEN/NOTIFY. Within a
// process a step that makes jobs pending signals the store's subscribers
// at once, after its commit. Across processes each queue has a version
// (the sum of a few rows of the signals table, so concurrent bumps do not
// queue on one row): a step's commit is followed by a bump of its queues'
// versions, sent from one goroutine that gathers the queues of every step
// meanwhile into one statement; and while the store has subscribers, one
// goroutine reads every version in one statement, every PollMin after a
// change and twice as long after each read that found none, up to
// PollMax. An idle store with subscribers thus reads 1/PollMax times a
// second (62 with the defaults), whatever its number of subscriptions;
// a store without subscribers reads nothing.
type signals struct {
	s *store

	mu    sync.Mutex
	subs  map[chan struct{}][]string
	bumps map[string]bool
	base  map[string]int64 // versions last read; nil before the first read

	kick   chan struct{} // a bump is waiting
	wakeUp chan struct{} // a first subscriber came
	cancel context.CancelFunc
	done   sync.WaitGroup
}

func newSignals(s *store) *signals {
	return &signals{s: s, subs: map[chan struct{}][]string{}, bumps: map[string]bool{},
		kick: make(chan struct{}, 1), wakeUp: make(chan struct{}, 1)}
}

func (g *signals) start() {
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	g.done.Add(2)
	go g.bumpLoop(ctx)
	go g.pollLoop(ctx)
}

func (g *signals) stop() {
	if g.cancel == nil {
		return
	}
	g.cancel()
	g.done.Wait()
	g.mu.Lock()
	for c := range g.subs {
		delete(g.subs, c)
	}
	g.mu.Unlock()
}

// wake signals the local subscribers of queues and has their versions
// bumped for the other processes.
func (g *signals) wake(queues []string) {
	if len(queues) == 0 {
		return
	}
	g.mu.Lock()
	g.signalLocked(queues)
	for _, q := range queues {
		g.bumps[q] = true
	}
	g.mu.Unlock()
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

func (g *signals) signalLocked(queues []string) {
	for c, qs := range g.subs {
		if len(qs) == 0 || slices.ContainsFunc(queues, func(q string) bool { return slices.Contains(qs, q) }) {
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}
}

// bumpStatement is the statement that bumps the versions of queues, in
// one shard drawn at random, with its arguments; ok is false when there
// is no queue to bump. Rows go in queue order, so that two transactions
// take their locks in the same order.
func (g *signals) bumpStatement(queues []string) (query string, args []any, ok bool) {
	if len(queues) == 0 {
		return "", nil, false
	}
	queues = slices.Sorted(slices.Values(queues))
	args = make([]any, 0, 2*len(queues))
	vals := make([]string, 0, len(queues))
	shard := rand.IntN(8)
	for _, q := range queues {
		args = append(args, q, shard)
		vals = append(vals, "(?, ?, 1)")
	}
	return fmt.Sprintf(g.s.sqls.bump, strings.Join(vals, ", ")), args, true
}

// bumpTimeout bounds one bump statement.
const bumpTimeout = 5 * time.Second

func (g *signals) bumpLoop(ctx context.Context) {
	defer g.done.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.kick:
		}
		g.mu.Lock()
		queues := make([]string, 0, len(g.bumps))
		for q := range g.bumps {
			queues = append(queues, q)
		}
		clear(g.bumps)
		g.mu.Unlock()
		query, args, ok := g.bumpStatement(queues)
		if !ok {
			// An earlier round took the queues of this kick.
			continue
		}
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bumpTimeout)
		_, err := g.s.db.ExecContext(bctx, query, args...)
		cancel()
		if err != nil {
			g.s.log.Warn("kyu/mysql: could not bump queue versions; other processes' workers wake at their next poll", "err", err)
		}
	}
}

// subscribe adds a subscriber; the first one has the versions read now,
// so that it hears every bump after it returns.
func (g *signals) subscribe(ctx context.Context, queues []string) (chan struct{}, error) {
	g.mu.Lock()
	first := g.base == nil
	g.mu.Unlock()
	if first {
		v, err := g.read(ctx)
		if err != nil {
			return nil, err
		}
		g.mu.Lock()
		if g.base == nil {
			g.base = v
		}
		g.mu.Unlock()
	}
	c := make(chan struct{}, 1)
	g.mu.Lock()
	g.subs[c] = slices.Clone(queues)
	g.mu.Unlock()
	select {
	case g.wakeUp <- struct{}{}:
	default:
	}
	return c, nil
}

func (g *signals) unsubscribe(c chan struct{}) {
	g.mu.Lock()
	delete(g.subs, c)
	g.mu.Unlock()
}

// read returns every queue's version.
func (g *signals) read(ctx context.Context) (map[string]int64, error) {
	rows, err := g.s.db.QueryContext(ctx, g.s.sqls.versions)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	v := map[string]int64{}
	for rows.Next() {
		var q string
		var n int64
		if err := rows.Scan(&q, &n); err != nil {
			return nil, err
		}
		v[q] = n
	}
	return v, rows.Err()
}

func (g *signals) pollLoop(ctx context.Context) {
	defer g.done.Done()
	interval := g.s.opts.PollMin
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-g.wakeUp:
			interval = g.s.opts.PollMin
		}
		g.mu.Lock()
		idle := len(g.subs) == 0
		g.mu.Unlock()
		if idle {
			// Sleep until a subscriber comes.
			select {
			case <-ctx.Done():
				return
			case <-g.wakeUp:
			}
		}
		rctx, cancel := context.WithTimeout(ctx, bumpTimeout)
		v, err := g.read(rctx)
		cancel()
		changed := false
		if err == nil {
			var queues []string
			g.mu.Lock()
			for q, n := range v {
				if g.base != nil && g.base[q] != n {
					queues = append(queues, q)
				}
			}
			g.base = v
			if len(queues) > 0 {
				g.signalLocked(queues)
				changed = true
			}
			g.mu.Unlock()
		}
		if changed {
			interval = g.s.opts.PollMin
		} else {
			interval = min(2*interval, g.s.opts.PollMax)
		}
		timer.Reset(interval)
	}
}

// Subscribe signals when a job may have become pending in one of the
// queues (every queue when none is named): at once for steps of this
// store, within a poll interval for other processes'.
func (s *store) Subscribe(ctx context.Context, p backend.SubscribeParams) (*backend.Subscription, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	c, err := s.signals.subscribe(ctx, p.Queues)
	if err != nil {
		return nil, s.wrap("subscribe", err)
	}
	return backend.NewSubscription(c, func() { s.signals.unsubscribe(c) }), nil
}
