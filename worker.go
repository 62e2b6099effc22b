package kyu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/internal/lifecycle"
	"github.com/kyuhq/kyu/periodic"
)

// ErrWorkerStopped is returned by Start on a worker that has been shut
// down; a Worker runs once.
var ErrWorkerStopped = errors.New("kyu: worker stopped")

// shutdownFlushWait bounds how long Shutdown waits, after its grace, for
// outcomes of handlers that had already returned to reach the backend.
const shutdownFlushWait = 5 * time.Second

// releaseTimeout bounds the Release call that hands interrupted jobs back,
// and the Fail call that records an abandoned attempt.
const releaseTimeout = 10 * time.Second

// outcomeTimeout bounds one recording of outcomes by the completer, its
// retries included. Stopping the worker does not cut it short, so
// outcomes being recorded when Shutdown stops the completer still land.
const outcomeTimeout = 10 * time.Second

// Worker claims jobs from a backend and runs them with a Handler. Build one
// with NewWorker, then call Run, or Start and Shutdown. A Worker runs once:
// after Shutdown it cannot be started again.
//
// For each pool (a queue of Queues, or the queues of Pool) a fetcher
// claims jobs in batches, as slots free up, when the backend signals new
// work, or every PollInterval. Each job runs on a handler goroutine,
// reused from job to job (see handoff); one heartbeater extends all
// leases (and passes on cancel requests), one completer records outcomes
// of many jobs in one backend call, one reporter sends handlers' progress
// and log lines in batches, one loop keeps the worker's entry in the
// registry, one enqueues the periodic jobs if there are any, and unless
// disabled one maintainer promotes due jobs, recovers expired leases and
// applies retention while the store elects it (internal/maintenance),
// standing by otherwise.
type Worker struct {
	b   WorkerBackend
	cfg WorkerConfig
	log *slog.Logger

	fetchers  []*fetcher
	comp      *completer
	reports   *reporter
	heartbeat lifecycle.Loop
	maint     lifecycle.Loop
	registry  lifecycle.Loop
	// sched enqueues the periodic jobs in the periodic loop; nil when none.
	sched    *periodic.Scheduler
	periodic lifecycle.Loop

	// host names the worker in the registry; startedAt is set by Start.
	host      string
	startedAt time.Time

	mu    sync.Mutex // guards state, quiet and the contexts below
	state workerState
	// quiet is set by Quiet: the fetchers are stopped.
	quiet bool
	// lastCommand is the registry's command last obeyed; only the
	// registry loop touches it.
	lastCommand WorkerCommand
	stopped     chan struct{} // closed when Shutdown has finished
	// jobsCtx is the parent of every handler's context. It is never
	// cancelled (it only carries Start's values): each handler's context is
	// cancelled on its own, so starting a job touches no shared context.
	jobsCtx context.Context
	// never is never closed, and noStop does nothing; see runTimeout.
	never  chan struct{}
	noStop func() bool
	// timeouts ends handlers' contexts at their jobs' timeouts.
	timeouts timeouts

	runsMu sync.Mutex
	// runs holds the claimed jobs whose outcome is not yet recorded, in no
	// order; each run knows its place (jobRun.tracked).
	runs []*jobRun
	idle chan struct{} // if set, closed when runs becomes empty

	stats workerCounters

	// flushWait and outcomeTimeout are shutdownFlushWait and
	// outcomeTimeout; tests shorten them.
	flushWait, outcomeTimeout time.Duration
}

// jobsCtxKey marks Worker.jobsCtx.
type jobsCtxKey struct{}

type workerState int

const (
	workerNew workerState = iota
	workerRunning
	workerStopping
	workerStopped
)

// NewWorker returns a Worker over b; cfg takes the defaults documented on
// WorkerConfig. It returns an error for an invalid config, and panics
// when b is nil, as NewClient does.
func NewWorker(b WorkerBackend, cfg WorkerConfig) (*Worker, error) {
	if b == nil {
		panic("kyu: NewWorker: nil backend")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w := &Worker{
		b:       b,
		cfg:     cfg,
		log:     cfg.Logger.With("worker_id", cfg.ID),
		stopped: make(chan struct{}),
		never:   make(chan struct{}),
		noStop:  func() bool { return false },
		host:    hostname(),

		flushWait:      shutdownFlushWait,
		outcomeTimeout: outcomeTimeout,
	}
	w.timeouts.epoch = time.Now()
	sched, err := newScheduler(b, cfg.Periodic)
	if err != nil {
		return nil, err
	}
	w.sched = sched
	for _, q := range cfg.queueNames() {
		n := cfg.Queues[q]
		w.fetchers = append(w.fetchers, newFetcher(w, []*poolQueue{{name: q}}, false, n, cfg.claimBatch(n), cfg.ClaimAhead))
	}
	if p := cfg.Pool; p != nil {
		queues := make([]*poolQueue, len(p.Queues))
		for i, q := range p.Queues {
			queues[i] = &poolQueue{name: q.Name, weight: q.Weight, max: int32(q.Max)}
		}
		w.fetchers = append(w.fetchers, newFetcher(w, queues, p.weighted(), p.Concurrency, cfg.claimBatch(p.Concurrency), cfg.ClaimAhead))
	}
	// A pool has at most 1+earlyFactor times its concurrency of outcomes
	// unrecorded (see slots.releaseEarly), the jobs it claims ahead aside:
	// the completer's queue is sized for that.
	w.comp = newCompleter(w, (1+earlyFactor)*cfg.concurrency())
	w.reports = newReporter(w)
	return w, nil
}

// ID is the worker's id, as stored in the jobs it claims (Job.WorkerID)
// and in its entry in the registry (Client.Workers).
func (w *Worker) ID() string { return w.cfg.ID }

// Run starts the worker and blocks until ctx is done, then shuts down
// gracefully (see Shutdown) and returns nil, or the error of Start.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.Start(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-w.stopped: // someone else called Shutdown
	}
	return w.Shutdown(context.WithoutCancel(ctx))
}

// Start begins claiming and running jobs in background goroutines and
// returns. The worker runs until Shutdown; ctx only carries values to the
// background work, its cancellation does not stop the worker. Start on a
// running worker does nothing; on a stopped one it returns ErrWorkerStopped.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch w.state {
	case workerRunning:
		return nil
	case workerStopping, workerStopped:
		return ErrWorkerStopped
	}
	base := context.WithoutCancel(ctx)
	// Wrapped in a context.WithValue so that a lookup that reaches it
	// (a handler context's tree, as it grows, asks for the parent cancel
	// context)
	// walks the chain as an interface: the WithoutCancel context's own
	// Value method boxes it, an allocation per job.
	w.jobsCtx = context.WithValue(base, jobsCtxKey{}, nil)
	w.startedAt = w.cfg.Clock.Now()
	w.comp.loop.Start(base, w.comp.run)
	w.heartbeat.Start(base, w.heartbeatLoop)
	w.reports.loop.Start(base, w.reports.run)
	if !w.cfg.DisableMaintenance {
		w.startMaintenance(base)
	}
	for _, f := range w.fetchers {
		f.loop.Start(base, f.run)
	}
	w.registry.Start(base, w.registryLoop)
	if w.sched != nil {
		w.periodic.Start(base, w.periodicLoop)
	}
	w.state = workerRunning
	w.log.Info("kyu: worker started", "queues", w.cfg.servedQueues(), "concurrency", w.cfg.concurrency())
	return nil
}

// Shutdown stops the worker gracefully. It stops claiming at once, then
// waits for running jobs up to ShutdownGrace or until ctx ends, whichever
// comes first. Jobs still running then have their context cancelled and
// are handed back to the queue at once (pending again, the attempt not
// counted and recorded as interrupted) without waiting for their handlers
// to return; a handler that has not returned is logged as a warning and
// whatever it returns later is dropped. Finally the background loops stop.
//
// Shutdown is safe to call more than once and concurrently: every call
// returns once the worker has stopped, or with ctx's error when ctx ends
// first in a call that did not do the shutdown itself. On a worker never
// started it only marks it stopped.
func (w *Worker) Shutdown(ctx context.Context) error {
	w.mu.Lock()
	switch w.state {
	case workerNew:
		w.state = workerStopped
		close(w.stopped)
		w.mu.Unlock()
		return nil
	case workerStopping, workerStopped:
		w.mu.Unlock()
		select {
		case <-w.stopped:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	w.state = workerStopping
	w.mu.Unlock()

	err := w.shutdown(ctx)

	w.mu.Lock()
	w.state = workerStopped
	close(w.stopped)
	w.mu.Unlock()
	return err
}

func (w *Worker) shutdown(ctx context.Context) error {
	start := time.Now()
	w.log.Info("kyu: worker shutting down", "running", w.stats.running.Load(), "grace", w.cfg.ShutdownGrace)

	// Stop enqueueing periodic jobs, and claiming: cancel every fetcher
	// first, then wait for each.
	var wg sync.WaitGroup
	wg.Go(w.periodic.Stop)
	for _, f := range w.fetchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.loop.Stop()
		}()
	}
	wg.Wait()

	// Wait for running jobs, up to the grace period or ctx's end.
	grace := time.NewTimer(w.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-w.waitIdle():
	case <-grace.C:
	case <-ctx.Done():
	}

	var err error
	if abandoned := w.abandonRunning(); len(abandoned) > 0 {
		err = w.releaseAbandoned(abandoned)
	}
	// Handlers that returned before the grace ended have outcomes on their
	// way to the completer, even when no handler is left running: let them
	// land before the completer stops.
	if n := w.countRuns(); n > 0 {
		w.log.Debug("kyu: waiting for outcomes to be recorded", "count", n)
		flush := time.NewTimer(w.flushWait)
		select {
		case <-w.waitIdle():
		case <-flush.C:
			w.log.Warn("kyu: outcomes still unrecorded at shutdown", "count", w.countRuns())
		}
		flush.Stop()
	}

	w.heartbeat.Stop()
	w.reports.loop.Stop()
	w.comp.loop.Stop()
	w.maint.Stop()
	w.registry.Stop()
	w.deregister()
	w.log.Info("kyu: worker stopped", "took", time.Since(start).Round(time.Millisecond))
	return err
}

// abandonRunning takes every job whose handler is still running away from
// its handler: the run is marked abandoned, so whatever the handler returns
// later is dropped, and its context is cancelled.
func (w *Worker) abandonRunning() []*jobRun {
	w.runsMu.Lock()
	var abandoned []*jobRun
	for _, run := range w.runs {
		if run.state.abandon() {
			abandoned = append(abandoned, run)
		}
	}
	w.runsMu.Unlock()
	w.untrack(abandoned...)
	for _, run := range abandoned {
		run.cancel(nil)
		// Its goroutine no longer counts among the pool's handlers.
		if run.f.handoff.leave() {
			w.startHandler(run.f)
		}
	}
	return abandoned
}

// releaseAbandoned hands the leases of abandoned jobs back to the backend,
// so their jobs are pending again at once, and logs each handler that has
// not returned.
func (w *Worker) releaseAbandoned(runs []*jobRun) error {
	leases := make([]backend.Lease, len(runs))
	for i, run := range runs {
		leases[i] = run.lease
	}
	ctx, cancel := context.WithTimeout(w.jobsCtx, releaseTimeout)
	defer cancel()
	// What the handlers reported so far stays with the job.
	w.closeReports(ctx, runs)
	res, err := w.b.Release(ctx, backend.ReleaseParams{Leases: leases, Now: w.cfg.Clock.Now()})
	if err != nil {
		err = fmt.Errorf("kyu: release %d interrupted jobs: %w", len(runs), err)
		w.log.Error("kyu: could not hand interrupted jobs back; they return when their leases expire", "count", len(runs), "error", err)
	}
	for i, run := range runs {
		run.f.slots.release(run.q)
		run.state.record()
		if err == nil && i < len(res.Errors) && res.Errors[i] != nil {
			w.log.Debug("kyu: interrupted job not released", "job_id", run.lease.JobID, "type", run.jobType, "error", res.Errors[i])
		}
		w.log.Warn("kyu: handler did not return by the end of the shutdown grace; job handed back",
			"job_id", run.lease.JobID, "type", run.jobType)
	}
	return err
}

// releaseUnstarted hands back to their queue, at once, the jobs a fetcher
// had claimed ahead that no handler will start (see handoff.close). Their attempt is
// not counted (Release); should the call fail, they return when their
// leases expire.
func (w *Worker) releaseUnstarted(runs []*jobRun) {
	if len(runs) == 0 {
		return
	}
	leases := make([]backend.Lease, 0, len(runs))
	for _, run := range runs {
		// A run is live until now: no handler has it.
		run.state.abandon()
		leases = append(leases, run.lease)
	}
	w.untrack(runs...)
	ctx, cancel := context.WithTimeout(w.jobsCtx, releaseTimeout)
	defer cancel()
	if _, err := w.b.Release(ctx, backend.ReleaseParams{Leases: leases, Now: w.cfg.Clock.Now()}); err != nil {
		w.log.Error("kyu: could not hand back jobs claimed but not started; they return when their leases expire",
			"count", len(runs), "error", err)
	} else {
		w.log.Debug("kyu: jobs claimed but not started handed back", "count", len(runs))
	}
	for _, run := range runs {
		run.cancel(nil)
		run.f.slots.release(run.q)
		run.state.record()
	}
}

// track registers runs until their outcome is recorded.
func (w *Worker) track(runs []*jobRun) {
	w.runsMu.Lock()
	for _, run := range runs {
		run.tracked = int32(len(w.runs))
		w.runs = append(w.runs, run)
	}
	w.runsMu.Unlock()
}

// finish forgets runs whose outcome is recorded (or dropped) and frees
// the slots they still hold, waking each fetcher that got slots back.
func (w *Worker) finish(runs []*jobRun) {
	w.untrack(runs...)
	// Each fetcher that got slots back is woken once, after the last
	// of them: woken at the first, it would find the others still held,
	// wait for a wake-up that no later release sent (claimSize), and
	// claim again only at its next poll.
	var wakeBuf [4]*fetcher
	wake := wakeBuf[:0]
	for _, run := range runs {
		f := run.f
		if f.slots.releaseOnRecord(run.q, run.hold) && !slices.Contains(wake, f) {
			wake = append(wake, f)
		}
		run.state.record()
	}
	for _, f := range wake {
		f.slots.wake()
	}
}

// untrack forgets runs, and wakes waitIdle's callers when none is left.
func (w *Worker) untrack(runs ...*jobRun) {
	w.runsMu.Lock()
	defer w.runsMu.Unlock()
	for _, run := range runs {
		i := int(run.tracked)
		if i < 0 {
			continue // forgotten already
		}
		last := len(w.runs) - 1
		w.runs[i] = w.runs[last]
		w.runs[i].tracked = int32(i)
		w.runs[last] = nil
		w.runs = w.runs[:last]
		run.tracked = -1
	}
	if len(w.runs) == 0 && w.idle != nil {
		close(w.idle)
		w.idle = nil
	}
}

// waitIdle returns a channel closed once no claimed job is left unrecorded.
func (w *Worker) waitIdle() <-chan struct{} {
	w.runsMu.Lock()
	defer w.runsMu.Unlock()
	if len(w.runs) == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	if w.idle == nil {
		w.idle = make(chan struct{})
	}
	return w.idle
}

func (w *Worker) countRuns() int {
	w.runsMu.Lock()
	defer w.runsMu.Unlock()
	return len(w.runs)
}

// WorkerStats are a worker's counters since it started.
type WorkerStats struct {
	// Processed counts handler calls that returned (or panicked).
	Processed int64
	// Succeeded counts jobs recorded completed.
	Succeeded int64
	// Failed counts attempts recorded failed (to be retried or final),
	// including attempts abandoned past their timeout.
	Failed int64
	// UnknownType counts attempts failed for want of a handler for their
	// type (also counted in Failed).
	UnknownType int64
	// Running is how many handlers are running now, including any
	// abandoned past its timeout that has not returned yet.
	Running int64
}

type workerCounters struct {
	processed, succeeded, failed, unknownType, running atomic.Int64
}

// Stats returns the worker's counters.
func (w *Worker) Stats() WorkerStats {
	return WorkerStats{
		Processed:   w.stats.processed.Load(),
		Succeeded:   w.stats.succeeded.Load(),
		Failed:      w.stats.failed.Load(),
		UnknownType: w.stats.unknownType.Load(),
		Running:     w.stats.running.Load(),
	}
}
