package kyu

import (
	"context"
	"fmt"
	"sync"

	"github.com/kyuhq/kyu/backend"
)

// WorkerCommand is a request to a worker process given through the
// store's worker registry (see WorkerConfig.OnCommand): quiet or stop.
type WorkerCommand = backend.WorkerCommand

// Worker commands.
const (
	// WorkerCommandQuiet: claim nothing more, let the jobs in flight end,
	// stay up (Worker.Quiet).
	WorkerCommandQuiet = backend.CommandQuiet
	// WorkerCommandStop: shut down gracefully (Worker.Shutdown).
	WorkerCommandStop = backend.CommandStop
)

// Quiet stops the worker's claims and lets the jobs it runs end; the
// worker stays up (heartbeats, outcomes, registry, maintenance and
// periodic jobs go on) until Shutdown, and its registry entry says
// quiet. It is what the quiet command does, and the step before a stop
// in a rolling deploy. Quiet is safe to call more than once, and does
// nothing on a worker not running; there is no way back but a new
// Worker.
func (w *Worker) Quiet() {
	w.mu.Lock()
	if w.state != workerRunning || w.quiet {
		w.mu.Unlock()
		return
	}
	w.quiet = true
	w.mu.Unlock()
	w.log.Info("kyu: worker quiet: claiming nothing more", "running", w.stats.running.Load())
	var wg sync.WaitGroup
	for _, f := range w.fetchers {
		wg.Go(f.loop.Stop)
	}
	wg.Wait()
}

// Done returns a channel closed once the worker has stopped: Shutdown has
// finished, whoever called it (the program, Run, or a stop command).
func (w *Worker) Done() <-chan struct{} {
	return w.stopped
}

// registryState is the worker's state as its registry entry gives it.
func (w *Worker) registryState() backend.WorkerState {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.state == workerStopping || w.state == workerStopped:
		return backend.WorkerStopping
	case w.quiet:
		return backend.WorkerQuiet
	}
	return backend.WorkerRunning
}

// obey acts on the command the registry gave, once per new command
// (the registry repeats it at every refresh). It reports whether the
// worker quieted, so the registry is told at once (a stopping worker
// deregisters instead).
func (w *Worker) obey(cmd WorkerCommand) bool {
	if cmd == "" || cmd == w.lastCommand {
		return false
	}
	w.lastCommand = cmd
	w.log.Info("kyu: worker command received", "command", cmd)
	if h := w.cfg.OnCommand; h != nil {
		go h(cmd)
		return false
	}
	switch cmd {
	case WorkerCommandQuiet:
		w.Quiet()
	case WorkerCommandStop:
		// Shutdown stops the registry loop that calls obey: it must
		// run on a goroutine of its own.
		go func() {
			if err := w.Shutdown(context.WithoutCancel(w.jobsCtx)); err != nil {
				w.log.Warn("kyu: shutdown on a stop command", "error", err)
			}
		}()
		return false
	default:
		w.log.Warn("kyu: unknown worker command ignored", "command", cmd)
		return false
	}
	return true
}

// QuietWorker gives the worker id the quiet command: at its next registry
// refresh it claims nothing more and lets its jobs in flight end (see
// WorkerConfig.OnCommand). It returns the worker's entry; an id with no
// entry gives an error matching ErrNotFound. Repeating it changes nothing.
func (c *Client) QuietWorker(ctx context.Context, id string) (WorkerInfo, error) {
	return c.commandWorker(ctx, id, WorkerCommandQuiet)
}

// StopWorker gives the worker id the stop command: at its next registry
// refresh it shuts down gracefully. As QuietWorker otherwise; stop wins
// over quiet.
func (c *Client) StopWorker(ctx context.Context, id string) (WorkerInfo, error) {
	return c.commandWorker(ctx, id, WorkerCommandStop)
}

func (c *Client) commandWorker(ctx context.Context, id string, cmd WorkerCommand) (WorkerInfo, error) {
	info, err := c.b.CommandWorker(ctx, backend.CommandWorkerParams{ID: id, Command: cmd, Now: c.cfg.Clock.Now()})
	if err != nil {
		return WorkerInfo{}, fmt.Errorf("kyu: %s worker %s: %w", cmd, id, err)
	}
	return info, nil
}
