package pebble

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// Worker entries live under their own keys ('w' + id) as a version byte
// followed by the entry's JSON, and in memory (Store.workers) for reading;
// they are few and change at a worker's heartbeat pace, far from the claim
// path.

// RegisterWorker records or replaces a worker's entry, with LastSeen,
// DeadAt and ExpiresAt set from p.Now and the command it held; it is
// durable when it returns.
func (s *store) RegisterWorker(ctx context.Context, p backend.RegisterWorkerParams) (backend.RegisterWorkerResult, error) {
	w := p.Registered()
	if err := s.begin(ctx); err != nil {
		return backend.RegisterWorkerResult{}, err
	}
	defer s.end()
	if err := s.lockState(); err != nil {
		return backend.RegisterWorkerResult{}, err
	}
	if old := s.workers[w.ID]; old != nil {
		w.Command = old.Command
	}
	g, err := s.putWorker(w)
	s.unlock()
	if err != nil {
		return backend.RegisterWorkerResult{}, err
	}
	return backend.RegisterWorkerResult{Command: w.Command}, wait(g)
}

// CommandWorker records a command on a worker's entry not expired at
// p.Now; it is durable when it returns.
func (s *store) CommandWorker(ctx context.Context, p backend.CommandWorkerParams) (backend.WorkerInfo, error) {
	if err := s.begin(ctx); err != nil {
		return backend.WorkerInfo{}, err
	}
	defer s.end()
	if err := s.lockState(); err != nil {
		return backend.WorkerInfo{}, err
	}
	old := s.workers[p.ID]
	if old == nil || !old.ExpiresAt.After(p.Now) {
		g := s.lastGroup()
		s.unlock()
		if err := wait(g); err != nil {
			return backend.WorkerInfo{}, err
		}
		return backend.WorkerInfo{}, backend.ErrWorkerNotFound
	}
	w := old.Clone()
	w.Command = old.Command.Stronger(p.Command)
	var g *commitGroup
	var err error
	if w.Command != old.Command {
		g, err = s.putWorker(w)
	} else {
		g = s.lastGroup()
	}
	s.unlock()
	if err != nil {
		return backend.WorkerInfo{}, err
	}
	if err := wait(g); err != nil {
		return backend.WorkerInfo{}, err
	}
	out := w.Clone()
	out.Dead = !p.Now.Before(w.DeadAt)
	return *out, nil
}

// putWorker stores w in memory and in the current group; mu must be held.
func (s *store) putWorker(w *backend.WorkerInfo) (*commitGroup, error) {
	val, err := encodeWorker(w)
	if err != nil {
		return nil, err
	}
	s.workers[w.ID] = w
	g := s.group()
	_ = g.batch.Set(workerKey(w.ID), val, nil)
	return g, nil
}

// DeregisterWorker removes a worker's entry; an unknown id is not an
// error.
func (s *store) DeregisterWorker(ctx context.Context, p backend.DeregisterWorkerParams) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	if err := s.lockState(); err != nil {
		return err
	}
	var g *commitGroup
	if _, ok := s.workers[p.ID]; ok {
		delete(s.workers, p.ID)
		g = s.group()
		_ = g.batch.Delete(workerKey(p.ID), nil)
	}
	s.unlock()
	return wait(g)
}

// Workers lists the entries not expired at p.Now, by id, marking Dead
// those silent since their DeadAt. It answers once the entries it read
// are durable.
func (s *store) Workers(ctx context.Context, p backend.WorkersParams) ([]backend.WorkerInfo, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	if err := s.lockState(); err != nil {
		return nil, err
	}
	out := make([]backend.WorkerInfo, 0, len(s.workers))
	for _, w := range s.workers {
		if !w.ExpiresAt.After(p.Now) {
			continue
		}
		c := w.Clone()
		c.Dead = !p.Now.Before(w.DeadAt)
		out = append(out, *c)
	}
	g := s.lastGroup()
	s.unlock()
	if err := wait(g); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b backend.WorkerInfo) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out, nil
}

// dropWorkers removes, at most limit, the entries expired at now; mu must
// be held.
func (s *store) dropWorkers(now time.Time, limit int) {
	n := 0
	for id, w := range s.workers {
		if n >= limit {
			return
		}
		if !w.ExpiresAt.After(now) {
			delete(s.workers, id)
			_ = s.group().batch.Delete(workerKey(id), nil)
			n++
		}
	}
}

func encodeWorker(w *backend.WorkerInfo) ([]byte, error) {
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("kyu/pebble: encode worker %s: %w", w.ID, err)
	}
	return append([]byte{uniqueVersion}, b...), nil
}

func decodeWorker(b []byte) (*backend.WorkerInfo, error) {
	if len(b) == 0 || b[0] != uniqueVersion {
		return nil, fmt.Errorf("%w: bad worker entry", errCorruptRecord)
	}
	w := &backend.WorkerInfo{}
	if err := json.Unmarshal(b[1:], w); err != nil {
		return nil, fmt.Errorf("%w: bad worker entry: %w", errCorruptRecord, err)
	}
	return w, nil
}
