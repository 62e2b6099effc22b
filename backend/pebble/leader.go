package pebble

import (
	"context"
	"sync"

	"github.com/kyuhq/kyu/backend"
)

// leaders holds the Leader leases. They live in memory only: the store
// belongs to one process at a time (its directory is locked), so every
// holder lives in that process and goes when it ends; a reopened store
// starts its terms at 1 again.
type leaders struct {
	mu    sync.Mutex
	byKey map[string]backend.Leadership
}

// Lead takes or renews the lease p.Name for p.Holder, or reports who holds
// it (see backend.Leader).
func (s *store) Lead(ctx context.Context, p backend.LeadParams) (backend.Leadership, error) {
	if err := s.begin(ctx); err != nil {
		return backend.Leadership{}, err
	}
	defer s.end()
	s.leaders.mu.Lock()
	defer s.leaders.mu.Unlock()
	l := backend.NextLeadership(s.leaders.byKey[p.Name], p)
	if l.Held {
		if s.leaders.byKey == nil {
			s.leaders.byKey = map[string]backend.Leadership{}
		}
		s.leaders.byKey[p.Name] = l
	}
	return l, nil
}

// Resign gives up a lease p.Holder holds in term p.Epoch.
func (s *store) Resign(ctx context.Context, p backend.ResignParams) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	s.leaders.mu.Lock()
	defer s.leaders.mu.Unlock()
	if l, ok := backend.ResignedLeadership(s.leaders.byKey[p.Name], p); ok {
		s.leaders.byKey[p.Name] = l
	}
	return nil
}
