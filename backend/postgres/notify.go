package postgres

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kyuhq/kyu/backend"
)

// anyQueue is the key of a subscriber to every queue (no queue name is
// empty).
const anyQueue = ""

// readyWait bounds how long Subscribe waits for the LISTEN connection.
// When the database cannot be reached that long, Subscribe returns anyway:
// workers poll, and the listener keeps trying.
const readyWait = 5 * time.Second

// listener keeps one connection, outside the pool, that LISTENs on the
// store's channels and hands each notification to its subscribers: on the
// queue channel the payload is a queue name, for Subscribe; on the finished
// channel it is the id of a watched job that ended, for WatchFinished. It starts with the first Subscribe
// and reconnects when its connection is lost, waking every subscriber
// then, since notifications may have been missed meanwhile.
type listener struct {
	s *store

	mu      sync.Mutex
	subs    map[string]map[*subscriber]struct{}
	watches map[string]map[*subscriber]struct{} // by job id
	started bool
	stopped bool
	ready   chan struct{} // closed once the first LISTEN succeeded
	cancel  context.CancelFunc
	done    chan struct{}
}

// subscriber is one Subscription's channel.
type subscriber struct {
	c chan struct{}
}

func newListener(s *store) *listener {
	return &listener{s: s, subs: map[string]map[*subscriber]struct{}{}, watches: map[string]map[*subscriber]struct{}{},
		ready: make(chan struct{})}
}

// Subscribe returns a subscription signalled whenever a job becomes pending
// in one of p.Queues (every queue when none is named): by this store
// directly, and by any process through NOTIFY. Signals coalesce in a buffer
// of one. It returns once the LISTEN is in place, so every later event is
// heard (or after readyWait when the database cannot be reached).
func (s *store) Subscribe(ctx context.Context, p backend.SubscribeParams) (*backend.Subscription, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	l := s.listen
	sub := &subscriber{c: make(chan struct{}, 1)}
	keys := distinct(p.Queues)
	if len(keys) == 0 {
		keys = []string{anyQueue}
	}
	l.mu.Lock()
	for _, q := range keys {
		m := l.subs[q]
		if m == nil {
			m = map[*subscriber]struct{}{}
			l.subs[q] = m
		}
		m[sub] = struct{}{}
	}
	l.startLocked()
	l.mu.Unlock()
	if err := l.waitReady(ctx); err != nil {
		l.remove(l.subs, sub, keys)
		return nil, err
	}
	return backend.NewSubscription(sub.c, func() { l.remove(l.subs, sub, keys) }), nil
}

// WatchFinished returns a subscription signalled when one of p.IDs ends or
// is deleted. Once the LISTEN is in place it marks the jobs watched, so the
// statement that ends or deletes one of them sends a NOTIFY on the
// finished channel (statements that end unwatched jobs send none). A job
// that ended before the mark is found final by the caller's Get; the
// marks stay after the subscription closes, costing at most one NOTIFY.
//
// Marking locks the rows until it commits, and a claim meanwhile skips
// them (SKIP LOCKED): its worker, finding nothing, waits for a wake-up.
// So the queues of the pending jobs marked are woken once the mark is
// in, or such a job could wait for the worker's next poll.
func (s *store) WatchFinished(ctx context.Context, p backend.WatchParams) (*backend.Subscription, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	l := s.listen
	sub := &subscriber{c: make(chan struct{}, 1)}
	var ids []string
	for _, id := range p.IDs {
		if c, err := parseID(id); err == nil && !slices.Contains(ids, c) {
			ids = append(ids, c)
		}
	}
	l.mu.Lock()
	for _, id := range ids {
		m := l.watches[id]
		if m == nil {
			m = map[*subscriber]struct{}{}
			l.watches[id] = m
		}
		m[sub] = struct{}{}
	}
	l.startLocked()
	l.mu.Unlock()
	if err := l.waitReady(ctx); err != nil {
		l.remove(l.watches, sub, ids)
		return nil, err
	}
	if len(ids) > 0 {
		pending, err := s.markWatched(ctx, ids)
		if err != nil {
			l.remove(l.watches, sub, ids)
			return nil, s.wrap("watch", err)
		}
		s.notifyPending(pending)
	}
	return backend.NewSubscription(sub.c, func() { l.remove(l.watches, sub, ids) }), nil
}

// markWatched marks the jobs ids watched and returns the queues of those
// marked that are pending.
func (s *store) markWatched(ctx context.Context, ids []string) ([]string, error) {
	rows, err := s.pool.Query(ctx, s.sqls.watch, ids)
	if err != nil {
		return nil, err
	}
	var queues []string
	var queue string
	var pending bool
	_, err = pgx.ForEachRow(rows, []any{&queue, &pending}, func() error {
		if pending && !slices.Contains(queues, queue) {
			queues = append(queues, queue)
		}
		return nil
	})
	return queues, err
}

// waitReady waits for the LISTEN connection, at most readyWait (then the
// caller relies on polling until it is ready).
func (l *listener) waitReady(ctx context.Context) error {
	timer := time.NewTimer(readyWait)
	defer timer.Stop()
	select {
	case <-l.ready:
	case <-timer.C:
		l.s.log.Warn("kyu/postgres: LISTEN connection not ready; subscription relies on polling until it is", "schema", l.s.opts.Schema)
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// remove forgets a subscriber under keys of the map m (l.subs or
// l.watches).
func (l *listener) remove(m map[string]map[*subscriber]struct{}, sub *subscriber, keys []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		delete(m[k], sub)
		if len(m[k]) == 0 {
			delete(m, k)
		}
	}
}

// startLocked starts the listening goroutine once; l.mu is held.
func (l *listener) startLocked() {
	if l.started || l.stopped {
		return
	}
	l.started = true
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	l.done = make(chan struct{})
	go l.run(ctx)
}

// stop ends the listening goroutine and waits for it.
func (l *listener) stop() {
	l.mu.Lock()
	l.stopped = true
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// signal wakes the subscribers of queue (and of every queue) without
// blocking.
func (l *listener) signal(queue string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, key := range [...]string{queue, anyQueue} {
		for sub := range l.subs[key] {
			select {
			case sub.c <- struct{}{}:
			default:
			}
		}
	}
}

// signalFinished wakes the watchers of the job id without blocking.
func (l *listener) signalFinished(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for sub := range l.watches[id] {
		select {
		case sub.c <- struct{}{}:
		default:
		}
	}
}

// signalAll wakes every subscriber and watcher.
func (l *listener) signalAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, subs := range [...]map[string]map[*subscriber]struct{}{l.subs, l.watches} {
		for _, m := range subs {
			for sub := range m {
				select {
				case sub.c <- struct{}{}:
				default:
				}
			}
		}
	}
}

// run listens until ctx ends, reconnecting after a pause when the
// connection fails.
func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	first := true
	for {
		err := l.listenOnce(ctx, func() {
			if first {
				close(l.ready)
				first = false
				return
			}
			// Back after a loss: anything may have happened meanwhile.
			l.signalAll()
		})
		if ctx.Err() != nil {
			return
		}
		l.s.log.Warn("kyu/postgres: LISTEN connection lost; retrying", "schema", l.s.opts.Schema, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(l.s.opts.ListenRetry):
		}
	}
}

// listenOnce opens a connection, LISTENs, calls ready, and hands out
// notifications until the connection fails or ctx ends.
func (l *listener) listenOnce(ctx context.Context, ready func()) error {
	cfg := l.s.pool.Config().ConnConfig.Copy()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.s.channel}.Sanitize()+"; LISTEN "+pgx.Identifier{l.s.finished}.Sanitize()); err != nil {
		return err
	}
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel == l.s.finished {
			l.signalFinished(n.Payload)
		} else {
			l.signal(n.Payload)
		}
	}
}
