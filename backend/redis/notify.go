package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/redis/rueidis"
)

// notifier carries wake-ups: every script that makes a job pending
// publishes on its queue's channel (P:wake:<queue>); one pattern
// subscription per Store (PSUBSCRIBE P:wake:*, on a connection of its own)
// hears them all and signals the local subscriptions of that queue. On a
// Cluster, Pub/Sub messages reach every node, so the subscription may sit
// on any of them.
//
// The subscription starts with the first Subscribe, which returns only
// once the server is known to deliver to it: the loop publishes a probe on
// a channel no queue uses until the probe comes back. After a lost
// connection the loop subscribes again and signals every subscription,
// since wake-ups may have been missed meanwhile.
type notifier struct {
	s *Store

	mu      sync.Mutex
	subs    map[*waiter]struct{}
	started bool
	ready   chan struct{} // closed when the first probe came back
	probe   string
	cancel  context.CancelFunc
	stopped chan struct{}
}

// waiter is one Subscription: its queues (nil: all) and its channel.
type waiter struct {
	queues []string
	c      chan struct{}
}

func newNotifier(s *Store) *notifier {
	b := make([]byte, 8)
	rand.Read(b)
	return &notifier{s: s, subs: map[*waiter]struct{}{}, ready: make(chan struct{}), probe: "probe-" + hex.EncodeToString(b)}
}

// probeChannel is on the wake pattern but names no queue (queue names are
// never empty).
func (n *notifier) probeChannel() string { return n.s.keys.wakeChannel("") }

// Subscribe returns a subscription that is signalled whenever a job
// becomes pending in one of p.Queues (in any queue when none is named).
func (s *Store) Subscribe(ctx context.Context, p backend.SubscribeParams) (*backend.Subscription, error) {
	for _, q := range p.Queues {
		if !backend.ValidQueueName(q) {
			return nil, &backend.ValidationError{Index: -1, Field: "queues", Reason: fmt.Sprintf("%q is not 1-128 characters of [A-Za-z0-9._:-]", q)}
		}
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	w := &waiter{queues: slices.Clone(p.Queues), c: make(chan struct{}, 1)}
	n := s.notify
	n.mu.Lock()
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
		n.s.client.Do(ctx, n.s.client.B().Publish().Channel(n.probeChannel()).Message(n.probe).Build())
		select {
		case <-n.ready:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-n.s.done:
			return backend.ErrClosed
		case <-limit.C:
			return fmt.Errorf("kyu/redis: subscribe: no message came back on %s", n.probeChannel())
		case <-tick.C:
		}
	}
}

// loop holds the pattern subscription until stop.
func (n *notifier) loop(ctx context.Context) {
	defer close(n.stopped)
	prefix := n.s.keys.wakeChannel("")
	var once sync.Once
	wait := 10 * time.Millisecond
	for first := true; ctx.Err() == nil; first = false {
		if !first {
			// Wake-ups may have been lost while the connection was down.
			n.signal(func(*waiter) bool { return true })
		}
		err := n.s.client.Receive(ctx, n.s.client.B().Psubscribe().Pattern(n.s.keys.wakePattern()).Build(), func(m rueidis.PubSubMessage) {
			queue := strings.TrimPrefix(m.Channel, prefix)
			if queue == "" {
				if m.Message == n.probe {
					once.Do(func() { close(n.ready) })
				}
				return
			}
			n.signal(func(w *waiter) bool { return len(w.queues) == 0 || slices.Contains(w.queues, queue) })
		})
		if ctx.Err() != nil {
			return
		}
		n.s.log.Warn("wake-up subscription lost, subscribing again", "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(wait*2, time.Second)
	}
}

// signal wakes the subscriptions match chooses; signals coalesce.
func (n *notifier) signal(match func(*waiter) bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for w := range n.subs {
		if match(w) {
			select {
			case w.c <- struct{}{}:
			default:
			}
		}
	}
}

// stop ends the subscription loop.
func (n *notifier) stop() {
	n.mu.Lock()
	cancel, stopped := n.cancel, n.stopped
	n.mu.Unlock()
	if cancel != nil {
		cancel()
		<-stopped
	}
}
