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
	// A stale entry of an earlier run under the same id (a fixed
	// WorkerConfig.ID, a crash) could hold a command meant for that run;
	// if this fails, the first registration says so.
	dctx, cancel := context.WithTimeout(ctx, registryTimeout)
	_ = w.b.DeregisterWorker(dctx, backend.DeregisterWorkerParams{ID: w.cfg.ID})
	cancel()
	for {
		cmd, err := w.register(ctx)
		if err == nil && w.obey(cmd) {
			// Tell the registry the new state at once.
			_, err = w.register(ctx)
		}
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

// register records the worker's entry as it is now and returns the
// command the registry holds for it. The call is not cut short when the
// loop stops (only by registryTimeout): a registration still on its way
// to a server could otherwise land after the deregistration at shutdown
// and leave a dead entry behind.
func (w *Worker) register(ctx context.Context) (WorkerCommand, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), registryTimeout)
	defer cancel()
	dead := registryDeadAfter * w.cfg.RegistryInterval
	now := w.cfg.Clock.Now()
	res, err := w.b.RegisterWorker(ctx, backend.RegisterWorkerParams{
		Worker:      w.registryEntry(now),
		DeadAfter:   dead,
		ExpireAfter: max(registryExpireAfter, dead),
		Now:         now,
	})
	return res.Command, err
}

// registryEntry describes the worker at now: its identity, the ids of the
// jobs it holds (claimed ahead and waiting for a handler, running, or
// whose outcome is being recorded), its
// counters, its state and its periodic schedules. Processed counts every
// attempt whose outcome was recorded, Failed those recorded failed, as the
// store's own counters do.
func (w *Worker) registryEntry(now time.Time) backend.WorkerInfo {
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
		State:       w.registryState(),
		Periodic:    w.periodicInfo(now),
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
