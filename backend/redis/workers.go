package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/redis/rueidis"
)

// The worker registry is three store-wide keys (keys.go): {P}:workers
// holds each entry as JSON, {P}:worker-ends the ids by expiry, so
// ApplyRetention finds the expired ones without reading every entry, and
// {P}:worker-cmds the commands (apart from the entries, which each
// refresh replaces whole). They share the store-wide hash tag, so the
// worker scripts touch one slot.

// RegisterWorker records or refreshes a worker's entry and returns the
// command on it.
func (s *store) RegisterWorker(ctx context.Context, p backend.RegisterWorkerParams) (backend.RegisterWorkerResult, error) {
	if err := s.enter(); err != nil {
		return backend.RegisterWorkerResult{}, err
	}
	defer s.leave()
	w := p.Registered()
	entry, err := json.Marshal(w)
	if err != nil {
		return backend.RegisterWorkerResult{}, fmt.Errorf("kyu/redis: register worker %s: %w", w.ID, err)
	}
	sc := s.scripts.registerWorker
	var cmd string
	err = s.retry(ctx, func(int) error {
		var err error
		cmd, err = s.eval(ctx, sc, sc.storeKeys(s.keys), []string{w.ID, string(entry), ms(w.ExpiresAt.UnixMilli())}).ToString()
		return err
	})
	if err != nil {
		return backend.RegisterWorkerResult{}, fmt.Errorf("kyu/redis: register worker %s: %w", w.ID, err)
	}
	return backend.RegisterWorkerResult{Command: backend.WorkerCommand(cmd)}, nil
}

// CommandWorker records a command on a worker's entry not expired at
// p.Now.
func (s *store) CommandWorker(ctx context.Context, p backend.CommandWorkerParams) (backend.WorkerInfo, error) {
	if err := s.enter(); err != nil {
		return backend.WorkerInfo{}, err
	}
	defer s.leave()
	sc := s.scripts.commandWorker
	var reply []string
	err := s.retry(ctx, func(int) error {
		r := s.eval(ctx, sc, sc.storeKeys(s.keys), []string{p.ID, string(p.Command), ms(p.Now.UnixMilli())})
		if rueidis.IsRedisNil(r.Error()) {
			reply = nil
			return nil
		}
		var err error
		reply, err = r.AsStrSlice()
		return err
	})
	if err != nil {
		return backend.WorkerInfo{}, fmt.Errorf("kyu/redis: command worker %s: %w", p.ID, err)
	}
	if len(reply) != 2 {
		return backend.WorkerInfo{}, backend.ErrWorkerNotFound
	}
	var w backend.WorkerInfo
	if err := json.Unmarshal([]byte(reply[0]), &w); err != nil {
		return backend.WorkerInfo{}, fmt.Errorf("%w: worker entry %q in %s: %v", ErrCorrupt, p.ID, s.keys.workers(), err)
	}
	w.Command = backend.WorkerCommand(reply[1])
	w.Dead = !w.DeadAt.After(p.Now)
	return w, nil
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
	var all, cmds map[string]string
	err := s.retry(ctx, func(int) error {
		rs := s.client.DoMulti(ctx,
			s.client.B().Hgetall().Key(s.keys.workers()).Build(),
			s.client.B().Hgetall().Key(s.keys.workerCmds()).Build())
		var err error
		if all, err = rs[0].AsStrMap(); err != nil {
			return err
		}
		cmds, err = rs[1].AsStrMap()
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
		w.Command = backend.WorkerCommand(cmds[id])
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b backend.WorkerInfo) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
