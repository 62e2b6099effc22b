package mysql

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// Bounds of the watch poll: how often the store reads the states of the
// jobs it watches for other processes' steps.
const (
	watchPollMin = 5 * time.Millisecond
	watchPollMax = 100 * time.Millisecond
)

// watches carries WatchFinished signals: at once for this store's own
// steps, and for other processes' by a goroutine that, while there are
// watches, reads the state of every watched job in one statement, every
// watchPollMin after an end and twice as long after each read that found
// none, up to watchPollMax.
type watches struct {
	s *store

	mu      sync.Mutex
	subs    map[chan struct{}][]string
	running bool

	cancel context.CancelFunc
	done   chan struct{}
}

func newWatches(s *store) *watches {
	return &watches{s: s, subs: map[chan struct{}][]string{}}
}

// ended signals the watchers of jobs that became final or were deleted.
func (w *watches) ended(ids []string) {
	if len(ids) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for c, watched := range w.subs {
		if slices.ContainsFunc(ids, func(id string) bool { return slices.Contains(watched, id) }) {
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}
}

func (w *watches) add(ids []string) chan struct{} {
	c := make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.subs[c] = slices.Clone(ids)
	if !w.running {
		ctx, cancel := context.WithCancel(context.Background())
		w.running, w.cancel, w.done = true, cancel, make(chan struct{})
		go w.poll(ctx, w.done)
	}
	return c
}

func (w *watches) remove(c chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.subs, c)
}

func (w *watches) stop() {
	w.mu.Lock()
	cancel, done := w.cancel, w.done
	w.running = false
	w.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// poll reads the watched jobs' states until no watch is left.
func (w *watches) poll(ctx context.Context, done chan struct{}) {
	defer close(done)
	interval := watchPollMin
	reported := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
		w.mu.Lock()
		var ids []string
		for _, watched := range w.subs {
			for _, id := range watched {
				if !reported[id] && !slices.Contains(ids, id) {
					ids = append(ids, id)
				}
			}
		}
		if len(w.subs) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		var ended []string
		for len(ids) > 0 {
			n := min(len(ids), 500)
			chunk := ids[:n]
			ids = ids[n:]
			live, err := w.unfinished(ctx, chunk)
			if err != nil {
				break
			}
			for _, id := range chunk {
				if !live[id] {
					ended = append(ended, id)
					reported[id] = true
				}
			}
		}
		if len(ended) > 0 {
			w.ended(ended)
			interval = watchPollMin
		} else {
			interval = min(2*interval, watchPollMax)
		}
	}
}

// unfinished returns which of ids name jobs that exist and are not final.
func (w *watches) unfinished(ctx context.Context, ids []string) (map[string]bool, error) {
	rows, err := w.s.db.QueryContext(ctx, fmt.Sprintf(`SELECT id FROM `+w.s.table("jobs")+
		` WHERE id IN %s AND state NOT IN ('completed', 'failed', 'cancelled')`, placeholders(len(ids))), anyArgs(ids)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}

// WatchFinished signals when one of the named jobs becomes final or is
// deleted: at once for steps of this store, within a poll interval for
// other processes'.
func (s *store) WatchFinished(ctx context.Context, p backend.WatchParams) (*backend.Subscription, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	c := s.watches.add(p.IDs)
	return backend.NewSubscription(c, func() { s.watches.remove(c) }), nil
}
