package pebble

import (
	"context"

	"github.com/kyuhq/kyu/backend"
)

// anyQueue is the subscription key of a subscriber to every queue (no
// queue name can be empty).
const anyQueue = ""

// subscriber is one Subscription's channel.
type subscriber struct {
	c chan struct{}
}

// Subscribe returns a subscription signalled, after the commit, whenever a
// job becomes pending in one of p.Queues (every queue when none is named),
// unless a waiting claim took it in the same commit (ClaimWait). Signals
// coalesce in a buffer of one.
func (s *store) Subscribe(ctx context.Context, p backend.SubscribeParams) (*backend.Subscription, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	sub := &subscriber{c: make(chan struct{}, 1)}
	keys := distinct(p.Queues)
	if len(keys) == 0 {
		keys = []string{anyQueue}
	}
	s.subsMu.Lock()
	for _, q := range keys {
		m := s.subs[q]
		if m == nil {
			m = make(map[*subscriber]struct{})
			s.subs[q] = m
		}
		m[sub] = struct{}{}
	}
	s.subsMu.Unlock()
	return backend.NewSubscription(sub.c, func() {
		s.subsMu.Lock()
		defer s.subsMu.Unlock()
		for _, q := range keys {
			delete(s.subs[q], sub)
			if len(s.subs[q]) == 0 {
				delete(s.subs, q)
			}
		}
	}), nil
}

// signal wakes the subscribers of a queue without blocking.
func (s *store) signal(queue string) {
	s.subsMu.Lock()
	defer s.subsMu.Unlock()
	for _, key := range [...]string{queue, anyQueue} {
		for sub := range s.subs[key] {
			select {
			case sub.c <- struct{}{}:
			default:
			}
		}
	}
}
