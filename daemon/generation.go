//go:build unix

package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kyuhq/kyu"
)

// generation is one kyu.Worker of the daemon, with the config it started
// with. Reload starts a new generation and stops the old one gracefully.
type generation struct {
	d      *Daemon
	n      int
	cfg    Config
	w      *kyu.Worker
	byType map[string]runner

	// closing makes new jobs park: they are handed back unrun at the stop.
	closing atomic.Bool
	// active counts handlers inside ProcessJob that have not parked;
	// parked those waiting to be handed back.
	active, parked atomic.Int64

	// gate holds a token per job running, at most Concurrency, when the
	// worker claims jobs ahead (Config.Prefetch); nil otherwise.
	gate chan struct{}
	// stopping is closed when the generation starts to stop: jobs
	// waiting at the gate are handed back, unrun.
	stopping     chan struct{}
	stoppingOnce sync.Once

	interrupt, kill         chan struct{}
	interruptOnce, killOnce sync.Once

	mu      sync.Mutex
	running map[string]runningJob // by job id

	stopOnce sync.Once
	stopped  chan struct{}
}

// runner runs one job, and returns the handler's error, or
// errInterrupted when stop interrupted it.
type runner interface {
	run(ctx context.Context, job *kyu.Job, stop stopSignals) error
}

// closer is a runner with processes of its own to end once its
// generation has stopped.
type closer interface {
	close()
}

// runningJob is what TTIN (LogState) shows of a running job.
type runningJob struct {
	Type    string
	Queue   string
	Attempt int
	Started time.Time
}

func newGeneration(d *Daemon, n int, cfg Config, b kyu.WorkerBackend) (*generation, error) {
	g := &generation{
		d: d, n: n, cfg: cfg,
		byType:    make(map[string]runner, len(cfg.Handlers)),
		interrupt: make(chan struct{}),
		kill:      make(chan struct{}),
		running:   map[string]runningJob{},
		stopped:   make(chan struct{}),
		stopping:  make(chan struct{}),
	}
	if cfg.ahead() > 0 {
		g.gate = make(chan struct{}, cfg.Concurrency)
	}
	for t, h := range cfg.Handlers {
		switch {
		case h.URL != "":
			g.byType[t] = newHTTPRunner(h, cfg.Concurrency)
		case h.Prefork > 0:
			g.byType[t] = newPreforkRunner(t, h, cfg)
		default:
			g.byType[t] = newExecRunner(t, h, cfg)
		}
	}
	id := ""
	if cfg.WorkerID != "" {
		id = fmt.Sprintf("%s-g%d", cfg.WorkerID, n)
	}
	wcfg := cfg.workerConfig(g, id)
	// A quiet or stop sent through the API (kyu workers quiet|stop, the
	// dashboard) acts on the whole daemon, as TSTP and TERM do. On its own
	// goroutine: both wait for this generation's worker, whose registry
	// loop calls OnCommand.
	wcfg.OnCommand = func(cmd kyu.WorkerCommand) {
		switch cmd {
		case kyu.WorkerCommandQuiet:
			cfg.Logger.Info("daemon: quiet asked through the API")
			go d.Quiet()
		case kyu.WorkerCommandStop:
			cfg.Logger.Info("daemon: stop asked through the API")
			go d.Stop()
		}
	}
	w, err := kyu.NewWorker(b, wcfg)
	if err != nil {
		return nil, err
	}
	g.w = w
	return g, nil
}

// ProcessJob runs one job in its handler's child.
func (g *generation) ProcessJob(ctx context.Context, job *kyu.Job) error {
	// Counted active first, so that stop never sees a handler that is
	// neither active nor parked but about to start a child.
	g.active.Add(1)
	if g.closing.Load() {
		return g.park(ctx)
	}
	// A job claimed ahead (Config.Prefetch) waits for a place to run; it
	// counts toward MaxJobs once it has one.
	if g.gate != nil {
		select {
		case g.gate <- struct{}{}:
			// A place freed as the stop began may win over stopping in
			// this select: a job that waited is handed back all the same.
			select {
			case <-g.stopping:
				<-g.gate
				return g.park(ctx)
			default:
			}
		case <-g.stopping:
			return g.park(ctx)
		case <-g.kill:
			return g.park(ctx)
		case <-ctx.Done():
			g.active.Add(-1)
			g.d.jobDone()
			err := fmt.Errorf("ended while waiting for a place to run: %w", context.Cause(ctx))
			g.cfg.Logger.Warn("job failed", "job_id", job.ID, "type", job.Type, "outcome", "retry", "error", err)
			return err
		}
		defer func() { <-g.gate }()
	}
	if !g.d.takeJob() {
		return g.park(ctx)
	}
	r := g.byType[job.Type]
	if r == nil {
		g.active.Add(-1)
		g.d.jobDone()
		err := fmt.Errorf("no handler for job type %q in this worker", job.Type)
		g.cfg.Logger.Warn("daemon: job failed", "job_id", job.ID, "type", job.Type, "error", err)
		return err
	}
	g.track(job)
	log := g.cfg.Logger
	if !g.cfg.JobLogOff {
		log.LogAttrs(ctx, g.cfg.JobLogLevel, "job started", slog.String("job_id", job.ID), slog.String("type", job.Type),
			slog.String("queue", job.Queue), slog.Int("attempt", job.Attempt), slog.Int("generation", g.n))
	}
	start := time.Now()
	err := r.run(ctx, job, stopSignals{interrupt: g.interrupt, kill: g.kill})
	g.untrack(job)
	took := time.Since(start).Round(time.Millisecond)
	if errors.Is(err, errInterrupted) {
		log.Warn("job interrupted by shutdown; handed back", "job_id", job.ID, "type", job.Type, "took", took)
		g.d.jobUntaken()
		return g.park(ctx)
	}
	switch {
	case err == nil:
		if !g.cfg.JobLogOff {
			log.LogAttrs(ctx, g.cfg.JobLogLevel, "job finished", slog.String("job_id", job.ID), slog.String("type", job.Type),
				slog.Duration("took", took), slog.String("outcome", "completed"))
		}
	case kyu.IsPermanent(err):
		log.Error("job failed", "job_id", job.ID, "type", job.Type, "took", took, "outcome", "failed", "error", err)
	default:
		log.Warn("job failed", "job_id", job.ID, "type", job.Type, "took", took, "outcome", "retry", "attempt", job.Attempt, "error", err)
	}
	g.active.Add(-1)
	g.d.jobDone()
	return err
}

// park holds a job that must not run (its handler counted active) until
// the generation's stop hands it back (see stop), or until it is
// cancelled.
func (g *generation) park(ctx context.Context) error {
	g.parked.Add(1)
	g.active.Add(-1)
	defer g.parked.Add(-1)
	<-ctx.Done()
	return context.Cause(ctx)
}

func (g *generation) track(job *kyu.Job) {
	g.mu.Lock()
	g.running[job.ID] = runningJob{Type: job.Type, Queue: job.Queue, Attempt: job.Attempt, Started: time.Now()}
	g.mu.Unlock()
}

func (g *generation) untrack(job *kyu.Job) {
	g.mu.Lock()
	delete(g.running, job.ID)
	g.mu.Unlock()
}

// start starts the generation's worker.
func (g *generation) start(ctx context.Context) error {
	return g.w.Start(ctx)
}

// quiet stops the generation's claims; its worker stays up, in the
// registry as quiet, and its running jobs go on to their outcomes.
func (g *generation) quiet() {
	g.w.Quiet()
}

// stopMode is how a generation stops.
type stopMode int

const (
	// stopGraceful lets running jobs finish within ShutdownTimeout, then
	// interrupts them (SIGTERM, SIGKILL after KillGrace).
	stopGraceful stopMode = iota
	// stopNow sends SIGKILL to every child at once.
	stopNow
)

// stop stops claiming, lets the running jobs finish or interrupts them
// (see stopMode), and hands back the jobs not run to the end, their
// attempts unused. A second call with stopNow hastens a graceful stop in
// progress. It returns once the worker has stopped.
func (g *generation) stop(mode stopMode) {
	if mode == stopNow {
		g.closing.Store(true)
		g.killOnce.Do(func() { close(g.kill) })
	}
	g.stopOnce.Do(func() { go g.doStop() })
	<-g.stopped
}

// doStop is the stop itself: kyu.Worker.Shutdown stops claiming and waits
// for the handlers; the daemon decides when to interrupt the children and
// when to end that wait, so that no job is handed back while its child
// still runs.
func (g *generation) doStop() {
	defer close(g.stopped)
	defer func() {
		for _, r := range g.byType {
			if c, ok := r.(closer); ok {
				c.close()
			}
		}
	}()
	g.stoppingOnce.Do(func() { close(g.stopping) })
	log := g.cfg.Logger.With("generation", g.n)
	shutCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.w.Shutdown(shutCtx) }()

	timeout := time.NewTimer(g.cfg.ShutdownTimeout)
	defer timeout.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	interrupted := false
	for {
		select {
		case err := <-done:
			if err != nil {
				log.Error("daemon: worker stop", "error", err)
			}
			return
		case <-timeout.C:
			if !interrupted {
				interrupted = true
				if n := g.active.Load(); n > 0 {
					log.Warn("daemon: shutdown timeout reached; stopping running children", "running", n)
				}
				g.closing.Store(true)
				g.interruptOnce.Do(func() { close(g.interrupt) })
			}
		case <-g.kill:
			interrupted = true
		case <-tick.C:
		}
		// Once no handler runs a child any more, the parked ones (never
		// run, or interrupted and their group gone) are handed back by
		// ending Shutdown's wait. A handler that has just left active
		// has not yet returned to the worker, whose outcome would be
		// dropped and its job handed back: the wait ends only when the
		// worker has no other handler running than the parked ones.
		if parked := g.parked.Load(); g.active.Load() == 0 && parked > 0 && g.w.Stats().Running <= parked {
			cancel()
		}
	}
}

// state logs the generation's running jobs.
func (g *generation) logState(log *slog.Logger) {
	g.mu.Lock()
	jobs := make([]runningJob, 0, len(g.running))
	ids := make([]string, 0, len(g.running))
	for id, j := range g.running {
		ids = append(ids, id)
		jobs = append(jobs, j)
	}
	g.mu.Unlock()
	st := g.w.Stats()
	log.Info("daemon: generation", "generation", g.n, "worker_id", g.w.ID(), "closing", g.closing.Load(),
		"running", len(jobs), "parked", g.parked.Load(), "processed", st.Processed,
		"succeeded", st.Succeeded, "failed", st.Failed)
	for i, j := range jobs {
		log.Info("daemon: running job", "generation", g.n, "job_id", ids[i], "type", j.Type, "queue", j.Queue,
			"attempt", j.Attempt, "for", time.Since(j.Started).Round(time.Millisecond))
	}
}
