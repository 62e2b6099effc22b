package postgres

import (
	"context"
	"sync"
	"time"
)

// notifyTimeout bounds one NOTIFY statement of the notifier.
const notifyTimeout = 5 * time.Second

// notifier sends the NOTIFY for Enqueue after its commit, from one
// goroutine, in statements of their own that write nothing, so enqueues
// commit without the server's notify lock and share WAL flushes. Queues
// named while a statement is in flight go out together in the next one, so
// under load there is about one NOTIFY round trip at a time, whatever the
// enqueue rate. A notification lost to a crash between the commit and the
// NOTIFY costs a waiting worker one poll interval.
type notifier struct {
	s *store

	mu     sync.Mutex
	queues map[string]struct{}

	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

func newNotifier(s *store) *notifier {
	return &notifier{s: s, queues: map[string]struct{}{}, wake: make(chan struct{}, 1)}
}

// start runs the notifier's goroutine.
func (n *notifier) start() {
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel, n.done = cancel, make(chan struct{})
	go n.run(ctx)
}

// stop sends what is waiting and ends the goroutine.
func (n *notifier) stop() {
	if n.cancel == nil {
		return
	}
	n.cancel()
	<-n.done
}

// notify asks for a NOTIFY of each queue, soon.
func (n *notifier) notify(queues []string) {
	if len(queues) == 0 {
		return
	}
	n.mu.Lock()
	for _, q := range queues {
		n.queues[q] = struct{}{}
	}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// take returns the queues waiting and forgets them.
func (n *notifier) take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.queues) == 0 {
		return nil
	}
	qs := make([]string, 0, len(n.queues))
	for q := range n.queues {
		qs = append(qs, q)
	}
	clear(n.queues)
	return qs
}

func (n *notifier) run(ctx context.Context) {
	defer close(n.done)
	for {
		select {
		case <-ctx.Done():
			n.send(context.Background(), n.take())
			return
		case <-n.wake:
			n.send(ctx, n.take())
		}
	}
}

// send notifies the queues in one statement; a failure is logged, since
// workers poll.
func (n *notifier) send(ctx context.Context, queues []string) {
	if len(queues) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	var count int64
	if err := n.s.pool.QueryRow(ctx, n.s.sqls.notify, n.s.channel, queues).Scan(&count); err != nil {
		n.s.log.Warn("kyu/postgres: NOTIFY failed; idle workers in other processes wake at their next poll",
			"schema", n.s.opts.Schema, "queues", len(queues), "err", err)
	}
}
