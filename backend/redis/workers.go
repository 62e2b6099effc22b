package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// The worker registry is two store-wide keys (keys.go): {P}:workers holds
// each entry as JSON, {P}:worker-ends the ids by expiry, so ApplyRetention
// finds the expired ones without reading every entry. Both share the
// store-wide hash tag, so lua/register_worker.lua and lua/deregister_worker.lua
// touch one slot.

// RegisterWorker records or refreshes a worker's entry.
func (s *store) RegisterWorker(ctx context.Context, p backend.RegisterWorkerParams) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	w := p.Registered()
	entry, err := json.Marshal(w)
	if err != nil {
		return fmt.Errorf("kyu/redis: register worker %s: %w", w.ID, err)
	}
	return s.workerScript(ctx, "register worker "+w.ID, s.scripts.registerWorker, w.ID, string(entry), ms(w.ExpiresAt.UnixMilli()))
}

// DeregisterWorker removes a worker's entry; an unknown id is not an error.
func (s *store) DeregisterWorker(ctx context.Context, p backend.DeregisterWorkerParams) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	if p.ID == "" {
		return nil
	}
	return s.workerScript(ctx, "deregister worker "+p.ID, s.scripts.deregisterWorker, p.ID, "")
}

// pruneWorkers removes the entries expired at now, a bounded number per
// call (ApplyRetention's caller repeats it).
func (s *store) pruneWorkers(ctx context.Context, now time.Time) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	return s.workerScript(ctx, "remove expired workers", s.scripts.deregisterWorker, "", ms(now.UnixMilli()))
}

func (s *store) workerScript(ctx context.Context, op string, sc *script, args ...string) error {
	err := s.retry(ctx, func(int) error {
		return s.eval(ctx, sc, sc.storeKeys(s.keys), args).Error()
	})
	if err != nil {
		return fmt.Errorf("kyu/redis: %s: %w", op, err)
	}
	return nil
}

// Workers lists the entries not expired at p.Now, by id, marking dead
// those whose DeadAt is not after p.Now.
func (s *store) Workers(ctx context.Context, p backend.WorkersParams) ([]backend.WorkerInfo, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	var all map[string]string
	err := s.retry(ctx, func(int) error {
		var err error
		all, err = s.client.Do(ctx, s.client.B().Hgetall().Key(s.keys.workers()).Build()).AsStrMap()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("kyu/redis: list workers: %w", err)
	}
	var out []backend.WorkerInfo
	for id, entry := range all {
		var w backend.WorkerInfo
		if err := json.Unmarshal([]byte(entry), &w); err != nil {
			return nil, fmt.Errorf("%w: worker entry %q in %s: %v", ErrCorrupt, id, s.keys.workers(), err)
		}
		if !w.ExpiresAt.After(p.Now) {
			continue
		}
		w.Dead = !w.DeadAt.After(p.Now)
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b backend.WorkerInfo) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
