//go:build unix

package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/kyuhq/kyu"
)

// Daemon is a worker daemon: it claims jobs from a backend and runs each
// in a child process of its type's handler. Build one with New, then call
// Run; Quiet, Resume, Reload, Stop, StopNow and LogState may be called
// from any goroutine while it runs (they are what the signals of `kyu
// worker` do).
type Daemon struct {
	b kyu.WorkerBackend

	mu    sync.Mutex
	cfg   Config
	cur   *generation   // the current generation; claims nothing while quiet
	old   []*generation // stopping, or stopped
	n     int           // generations started
	quiet bool
	ctx   context.Context // Run's, for the generations' values

	taken, finished atomic.Int64

	stopGraceful, stopNow chan struct{}
	gracefulOnce, nowOnce sync.Once
	wg                    sync.WaitGroup // old generations stopping
}

// New returns a Daemon over b; cfg takes the defaults documented on
// Config. It returns an error for an invalid config.
func New(b kyu.WorkerBackend, cfg Config) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Daemon{
		b:            b,
		cfg:          cfg.withDefaults(),
		stopGraceful: make(chan struct{}),
		stopNow:      make(chan struct{}),
	}, nil
}

// Run runs the daemon until ctx ends or Stop is called (a graceful stop),
// StopNow is called, or MaxJobs jobs have run; it returns nil once every
// job it claimed is finished or handed back.
func (d *Daemon) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.ctx != nil {
		d.mu.Unlock()
		return errors.New("daemon: Run called twice")
	}
	d.ctx = context.WithoutCancel(ctx)
	err := d.startGeneration()
	cfg := d.cfg
	d.mu.Unlock()
	if err != nil {
		return err
	}
	log := cfg.Logger
	log.Info("daemon: started", "queues", cfg.Queues, "concurrency", cfg.Concurrency, "handlers", len(cfg.Handlers))

	select {
	case <-ctx.Done():
		log.Info("daemon: stopping gracefully")
	case <-d.stopGraceful:
		log.Info("daemon: stopping gracefully")
	case <-d.stopNow:
		log.Info("daemon: stopping now")
	}
	d.mu.Lock()
	gens := append(d.old, d.cur)
	d.old, d.cur = nil, nil
	d.quiet = true
	d.mu.Unlock()

	var wg sync.WaitGroup
	stopped := make(chan struct{})
	for _, g := range gens {
		if g == nil {
			continue
		}
		wg.Go(func() { g.stop(stopGraceful) })
		go func() {
			select {
			case <-d.stopNow:
				g.stop(stopNow)
			case <-stopped:
			}
		}()
	}
	wg.Wait()
	close(stopped)
	d.wg.Wait()
	log.Info("daemon: stopped", "jobs", d.finished.Load())
	return nil
}

// startGeneration starts a generation with d.cfg; d.mu is held.
func (d *Daemon) startGeneration() error {
	d.n++
	g, err := newGeneration(d, d.n, d.cfg, d.b)
	if err != nil {
		return fmt.Errorf("daemon: generation %d: %w", d.n, err)
	}
	if err := g.start(d.ctx); err != nil {
		return fmt.Errorf("daemon: generation %d: %w", d.n, err)
	}
	d.cur = g
	d.quiet = false
	return nil
}

// retire stops g gracefully in the background; d.mu is held.
func (d *Daemon) retire(g *generation) {
	if g == nil {
		return
	}
	d.old = append(d.old, g)
	d.wg.Go(func() {
		g.stop(stopGraceful)
		d.mu.Lock()
		for i, o := range d.old {
			if o == g {
				d.old = append(d.old[:i], d.old[i+1:]...)
				break
			}
		}
		d.mu.Unlock()
	})
}

// running reports whether Run is running and not stopping; d.mu is held.
func (d *Daemon) running() bool {
	if d.ctx == nil {
		return false
	}
	select {
	case <-d.stopGraceful:
		return false
	case <-d.stopNow:
		return false
	default:
		return true
	}
}

// Quiet stops claiming jobs: the running ones finish (each within its
// own timeout) and the daemon stays up until Resume or a stop. The
// current generation's worker stays in the registry meanwhile, its state
// quiet, so the daemon stays listed (and can be stopped through the API)
// until it exits.
func (d *Daemon) Quiet() {
	d.mu.Lock()
	if d.quiet || !d.running() || d.cur == nil {
		d.mu.Unlock()
		return
	}
	d.quiet = true
	g := d.cur
	log := d.cfg.Logger
	d.mu.Unlock()
	log.Info("daemon: quiet: no more claims until resumed")
	// Not under d.mu: it waits for the worker's claims in flight.
	g.quiet()
}

// Resume claims jobs again after Quiet: a new generation claims them,
// and the quiet one is stopped (it has no job left, or finishes those it
// has within its ShutdownTimeout).
func (d *Daemon) Resume() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.quiet || !d.running() {
		return nil
	}
	d.cfg.Logger.Info("daemon: resumed")
	old := d.cur
	if err := d.startGeneration(); err != nil {
		return err
	}
	d.retire(old)
	return nil
}

// Reload replaces the config: a new generation claims jobs with it while
// the old one finishes its running jobs (within its ShutdownTimeout). A
// config that is not valid changes nothing. While quiet, the new config
// is kept for Resume.
func (d *Daemon) Reload(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cfg = cfg
	if d.quiet || !d.running() {
		return nil
	}
	old := d.cur
	if err := d.startGeneration(); err != nil {
		return err
	}
	d.retire(old)
	cfg.Logger.Info("daemon: reloaded", "generation", d.n, "queues", cfg.Queues, "concurrency", cfg.Concurrency, "handlers", len(cfg.Handlers))
	return nil
}

// Stop stops the daemon gracefully: no more claims, running jobs finish
// within ShutdownTimeout, then their children are sent SIGTERM and
// SIGKILL after KillGrace, and their jobs handed back with their attempts
// unused. Run returns when it is done.
func (d *Daemon) Stop() {
	d.gracefulOnce.Do(func() { close(d.stopGraceful) })
}

// StopNow stops the daemon at once: every child is sent SIGKILL and its
// job handed back. It also hastens a graceful stop in progress.
func (d *Daemon) StopNow() {
	d.nowOnce.Do(func() { close(d.stopNow) })
}

// LogState logs the running jobs and each generation's state at Info.
func (d *Daemon) LogState() {
	d.mu.Lock()
	gens := append([]*generation{d.cur}, d.old...)
	log, quiet := d.cfg.Logger, d.quiet
	d.mu.Unlock()
	log.Info("daemon: state", "quiet", quiet, "jobs_done", d.finished.Load(), "generations", len(gens))
	for _, g := range gens {
		if g != nil {
			g.logState(log)
		}
	}
}

// Jobs is how many jobs the daemon has run to an outcome.
func (d *Daemon) Jobs() int64 { return d.finished.Load() }

// takeJob counts a job about to run, and reports false when MaxJobs are
// taken already.
func (d *Daemon) takeJob() bool {
	d.mu.Lock()
	max := d.cfg.MaxJobs
	d.mu.Unlock()
	n := d.taken.Add(1)
	if max > 0 && n > int64(max) {
		d.taken.Add(-1)
		return false
	}
	if max > 0 && n == int64(max) {
		// The last job: claim no more, and let it finish.
		d.logger().Info("daemon: max_jobs reached; stopping after the running jobs", "max_jobs", max)
		d.Stop()
	}
	return true
}

// jobUntaken gives back the count of a job handed back unfinished.
func (d *Daemon) jobUntaken() { d.taken.Add(-1) }

// jobDone counts a job run to an outcome.
func (d *Daemon) jobDone() { d.finished.Add(1) }

var _ kyu.Handler = (*generation)(nil)

// logger is the current config's logger.
func (d *Daemon) logger() *slog.Logger {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg.Logger
}
