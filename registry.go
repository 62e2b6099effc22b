package kyu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// The registry's timings, relative to WorkerConfig.RegistryInterval: an
// entry not refreshed for registryDeadAfter intervals shows as dead, and
// is no longer listed registryExpireAfter (or registryDeadAfter intervals,
// if longer) after its last refresh.
const (
	registryDeadAfter   = 3
	registryExpireAfter = time.Hour
	// registryTimeout bounds one registration and the deregistration at
	// shutdown.
	registryTimeout = 5 * time.Second
)

// WorkerInfo is a worker process's entry in the registry, as Client.Workers
// lists it: who it is, what it serves, the jobs it runs, its counters, and
// whether it has gone silent (Dead).
type WorkerInfo = backend.WorkerInfo

// registryLoop registers the worker at once, then refreshes its entry
// every RegistryInterval. Failures are logged and retried at the next
// interval; a store without a registry stops the loop.
func (w *Worker) registryLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.RegistryInterval)
	defer t.Stop()
	failing := false
	for {
		err := w.register(ctx)
		switch {
		case err == nil:
			if failing {
				w.log.Info("kyu: worker registered again")
			}
			failing = false
		case errors.Is(err, ErrNotSupported):
			w.log.Info("kyu: the store keeps no worker registry; not registering")
			return
		case ctx.Err() != nil:
			return
		default:
			// Log the first failure of a run as a warning, the others quietly.
			level := w.log.Debug
			if !failing {
				level = w.log.Warn
			}
			level("kyu: worker registry refresh failed; retrying", "error", err, "interval", w.cfg.RegistryInterval)
			failing = true
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// register records the worker's entry as it is now.
func (w *Worker) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, registryTimeout)
	defer cancel()
	dead := registryDeadAfter * w.cfg.RegistryInterval
	return w.b.RegisterWorker(ctx, backend.RegisterWorkerParams{
		Worker:      w.registryEntry(),
		DeadAfter:   dead,
		ExpireAfter: max(registryExpireAfter, dead),
		Now:         w.cfg.Clock.Now(),
	})
}

// registryEntry describes the worker: its identity, the ids of the jobs it
// holds (running, or whose outcome is being recorded), and its counters.
// Processed counts every attempt whose outcome was recorded, Failed those
// recorded failed, as the store's own counters do.
func (w *Worker) registryEntry() backend.WorkerInfo {
	w.runsMu.Lock()
	running := make([]string, 0, len(w.runs))
	for _, run := range w.runs {
		running = append(running, run.lease.JobID)
	}
	w.runsMu.Unlock()
	slices.Sort(running)
	failed := w.stats.failed.Load()
	return backend.WorkerInfo{
		ID:          w.cfg.ID,
		Host:        w.host,
		PID:         os.Getpid(),
		Queues:      w.cfg.servedQueues(),
		Concurrency: w.cfg.concurrency(),
		StartedAt:   w.startedAt,
		Version:     w.cfg.Version,
		Running:     running,
		Processed:   w.stats.succeeded.Load() + failed,
		Failed:      failed,
	}
}

// deregister removes the worker's entry at a clean shutdown.
func (w *Worker) deregister() {
	ctx, cancel := context.WithTimeout(w.jobsCtx, registryTimeout)
	defer cancel()
	err := w.b.DeregisterWorker(ctx, backend.DeregisterWorkerParams{ID: w.cfg.ID})
	if err != nil && !errors.Is(err, ErrNotSupported) {
		w.log.Warn("kyu: could not remove the worker from the registry; it shows as dead until it expires",
			"error", fmt.Errorf("deregister: %w", err))
	}
}

// hostname is the host the registry names, "unknown" if the system does
// not say.
func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown"
	}
	return h
}
