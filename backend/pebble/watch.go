package pebble

import (
	"context"

	"github.com/kyuhq/kyu/backend"
)

// WatchFinished returns a subscription signalled, after the commit,
// whenever one of p.IDs becomes final or is deleted, whatever did it
// (Complete, Fail, Cancel, a deadline, RecoverLeases, Delete, Purge,
// retention). Signals coalesce in a buffer of one; an id that is not a
// job id is watched too and never signals.
func (s *store) WatchFinished(ctx context.Context, p backend.WatchParams) (*backend.Subscription, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	sub := &subscriber{c: make(chan struct{}, 1)}
	var ids []jobID
	for _, text := range p.IDs {
		if id, ok := parseID(text); ok {
			ids = append(ids, id)
		}
	}
	s.subsMu.Lock()
	for _, id := range ids {
		m := s.watchers[id]
		if m == nil {
			m = make(map[*subscriber]struct{})
			s.watchers[id] = m
		}
		m[sub] = struct{}{}
	}
	// Counted after registering, so that any state change after this call
	// returns sees a watcher and queues its id for signalling.
	s.watching.Add(int64(len(ids)))
	s.subsMu.Unlock()
	return backend.NewSubscription(sub.c, func() {
		s.subsMu.Lock()
		defer s.subsMu.Unlock()
		for _, id := range ids {
			delete(s.watchers[id], sub)
			if len(s.watchers[id]) == 0 {
				delete(s.watchers, id)
			}
		}
		s.watching.Add(-int64(len(ids)))
	}), nil
}

// finished queues a signal to the job's watchers for when the current
// group is durable; mu must be held. It costs nothing while nobody
// watches.
func (s *store) finished(id jobID) {
	if s.watching.Load() == 0 {
		return
	}
	g := s.group()
	g.finished = append(g.finished, id)
}

// signalFinished wakes the watchers of the given jobs without blocking.
func (s *store) signalFinished(ids []jobID) {
	s.subsMu.Lock()
	defer s.subsMu.Unlock()
	for _, id := range ids {
		for sub := range s.watchers[id] {
			select {
			case sub.c <- struct{}{}:
			default:
			}
		}
	}
}
