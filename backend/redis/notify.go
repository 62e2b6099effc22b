package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/redis/rueidis"
)

// notifier carries Pub/Sub signals to local subscriptions. A Store has
// two: wake-ups (Subscribe) and ends of jobs (WatchFinished).
//
// Every script that makes a job pending publishes on its queue's wake
// channel (P:wake:<queue>); every script that makes jobs final or deletes
// them publishes their ids on the queue's done channel ({P:N}:done). Each
// notifier holds one pattern subscription per Store (PSUBSCRIBE P:wake:*
// or {P:*}:done), started by the first subscription that needs it, and
// signals the local subscriptions the message concerns. Both hold it
// through the Store's Pub/Sub client (pubsubClient), never on a
// connection that runs scripts or MULTI. On a Cluster, Pub/Sub messages
// reach every node, so the subscription may sit on any of them. A process that never watches
// jobs never receives the done messages.
//
// The pattern subscription starts with the first subscription, which
// returns only once the server is known to deliver to it: the loop
// publishes a probe on a channel of the pattern that no queue uses until
// the probe comes back. After a lost connection the loop subscribes again
// and signals every subscription, since signals may have been missed
// meanwhile.
type notifier struct {
	s            *store
	pattern      string
	probeChannel string
	// route says which waiters a message on channel concerns.
	route func(channel, message string) func(*waiter) bool

	mu      sync.Mutex
	subs    map[*waiter]struct{}
	started bool
	ready   chan struct{} // closed when the first probe came back
	probe   string
	cancel  context.CancelFunc
	stopped chan struct{}

	// paused, when set (by tests, before the first subscription), learns
	// each pause of the loop before it subscribes again.
	paused func(time.Duration)
}

// waiter is one Subscription: its queues (nil: all) or the jobs it
// watches, and its channel.
type waiter struct {
	queues []string
	ids    map[string]bool
	c      chan struct{}
	// handoff, when set, is the waiting claim this subscription wakes: a
	// wake-up that comes while an enqueue fills it goes with its answer
	// (handoff.go).
	handoff *handoffClaim
}

func newNotifier(s *store, pattern, probeChannel string, route func(channel, message string) func(*waiter) bool) *notifier {
	b := make([]byte, 8)
	rand.Read(b)
	return &notifier{
		s: s, pattern: pattern, probeChannel: probeChannel, route: route,
		subs: map[*waiter]struct{}{}, ready: make(chan struct{}), probe: "probe-" + hex.EncodeToString(b),
	}
}

// newWakeNotifier carries wake-ups; its probe channel is on the wake
// pattern but names no queue (queue names are never empty).
func newWakeNotifier(s *store) *notifier {
	prefix := s.keys.wakeChannel("")
	return newNotifier(s, s.keys.wakePattern(), prefix, func(channel, _ string) func(*waiter) bool {
		queue := strings.TrimPrefix(channel, prefix)
		return func(w *waiter) bool { return len(w.queues) == 0 || slices.Contains(w.queues, queue) }
	})
}

// newDoneNotifier carries the ends of jobs.
func newDoneNotifier(s *store) *notifier {
	return newNotifier(s, s.keys.donePattern(), s.keys.doneProbe(), func(_, message string) func(*waiter) bool {
		ids := strings.Fields(message)
		return func(w *waiter) bool {
			for _, id := range ids {
				if w.ids[id] {
					return true
				}
			}
			return false
		}
	})
}

// Subscribe returns a subscription that is signalled whenever a job
// becomes pending in one of p.Queues (in any queue when none is named).
func (s *store) Subscribe(ctx context.Context, p backend.SubscribeParams) (*backend.Subscription, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	return s.notify.add(ctx, &waiter{queues: slices.Clone(p.Queues), c: make(chan struct{}, 1)})
}

// WatchFinished returns a subscription that is signalled whenever one of
// p.IDs becomes final or is deleted.
func (s *store) WatchFinished(ctx context.Context, p backend.WatchParams) (*backend.Subscription, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	ids := make(map[string]bool, len(p.IDs))
	for _, id := range p.IDs {
		ids[id] = true
	}
	return s.finish.add(ctx, &waiter{ids: ids, c: make(chan struct{}, 1)})
}

// add registers w, starting the pattern subscription if need be, and
// returns once the subscription receives. Once the store is closed it
// fails with backend.ErrClosed: a call that entered before Close may get
// here after stop, and must neither start a loop that Close no longer
// waits for nor get a subscription that no loop signals. Close marks the
// store closed before it stops the notifiers, so under mu either stop
// comes later and ends the loop, or add sees the store closed.
func (n *notifier) add(ctx context.Context, w *waiter) (*backend.Subscription, error) {
	n.mu.Lock()
	if n.s.closed.Load() {
		n.mu.Unlock()
		return nil, backend.ErrClosed
	}
	n.subs[w] = struct{}{}
	if !n.started {
		n.started = true
		lctx, cancel := context.WithCancel(context.Background())
		n.cancel = cancel
		n.stopped = make(chan struct{})
		go n.loop(lctx)
	}
	n.mu.Unlock()
	drop := func() {
		n.mu.Lock()
		delete(n.subs, w)
		n.mu.Unlock()
	}
	if err := n.waitReady(ctx); err != nil {
		drop()
		return nil, err
	}
	return backend.NewSubscription(w.c, drop), nil
}

// waitReady waits until the subscription is known to receive, publishing
// the probe meanwhile.
func (n *notifier) waitReady(ctx context.Context) error {
	select {
	case <-n.ready:
		return nil
	default:
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	limit := time.NewTimer(n.s.opts.RetryFor)
	defer limit.Stop()
	for {
		n.s.client.Do(ctx, n.s.client.B().Publish().Channel(n.probeChannel).Message(n.probe).Build())
		select {
		case <-n.ready:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-n.s.done:
			return backend.ErrClosed
		case <-limit.C:
			return fmt.Errorf("kyu/redis: subscribe: no message came back on %s", n.probeChannel)
		case <-tick.C:
		}
	}
}

// loop holds the pattern subscription until stop. After a lost
// connection it pauses before subscribing again, twice as long after each
// try that did not get as far as a confirmed subscription (10 ms up to
// 1 s); a confirmed one starts the pauses small again, so a connection
// cut now and then is followed each time by a short pause, not by the
// longest one reached so far.
func (n *notifier) loop(ctx context.Context) {
	defer close(n.stopped)
	const firstPause, lastPause = 10 * time.Millisecond, time.Second
	var once sync.Once
	pause := firstPause
	for first := true; ctx.Err() == nil; first = false {
		// subscribed is set by the server's confirmation of the pattern,
		// which rueidis reports from its reader goroutine.
		var subscribed atomic.Bool
		rctx := rueidis.WithOnSubscriptionHook(ctx, func(sub rueidis.PubSubSubscription) {
			if sub.Kind != "psubscribe" {
				return
			}
			subscribed.Store(true)
			if !first {
				// Signals may have been lost while the connection was
				// down: every subscription is signalled once the pattern
				// is subscribed again, so a claim it wakes misses nothing.
				n.signal(func(*waiter) bool { return true })
			}
		})
		c, err := n.s.pubsubClient()
		if err == nil {
			err = c.Receive(rctx, c.B().Psubscribe().Pattern(n.pattern).Build(), func(m rueidis.PubSubMessage) {
				if m.Channel == n.probeChannel {
					if m.Message == n.probe {
						once.Do(func() { close(n.ready) })
					}
					return
				}
				n.signal(n.route(m.Channel, m.Message))
			})
		}
		if ctx.Err() != nil || n.s.closed.Load() {
			return // stopped, or the store closes and stop is on its way
		}
		if subscribed.Load() {
			pause = firstPause
		}
		n.s.log.Warn("pub/sub subscription lost, subscribing again", "pattern", n.pattern, "err", err, "pause", pause)
		if n.paused != nil {
			n.paused(pause)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-n.s.done:
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(pause*2, lastPause)
	}
}

// signal wakes the subscriptions match chooses; signals coalesce.
func (n *notifier) signal(match func(*waiter) bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for w := range n.subs {
		if match(w) {
			if w.handoff != nil && n.s.handoffs.hold(w.handoff) {
				continue
			}
			select {
			case w.c <- struct{}{}:
			default:
			}
		}
	}
}

// stop ends the subscription loop and waits for it to return. Close
// calls it after marking the store closed, so no loop starts after it
// (add).
func (n *notifier) stop() {
	n.mu.Lock()
	cancel, stopped := n.cancel, n.stopped
	n.mu.Unlock()
	if cancel != nil {
		cancel()
		<-stopped
	}
}
