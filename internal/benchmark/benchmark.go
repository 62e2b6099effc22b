// Package benchmark measures a kyu backend end to end through the public
// API (kyu.Client and kyu.Worker), with default job settings: durable
// writes, default retention, no-op handlers. The same Run serves the
// `kyu bench` command and the Go benchmarks in this package.
//
// Run takes four measurements, each on its own fresh queue:
//
//   - enqueue: Jobs jobs, one per Enqueue call, from Producers goroutines;
//   - batch enqueue: Jobs jobs, Batch per EnqueueMany call, likewise;
//   - drain, once per Concurrency value: a Worker with that many handlers
//     is started on a queue holding Jobs pending jobs, and timed until every
//     job has run and its completion has been written to the store;
//   - latency: an idle Worker; one job is enqueued at a time and the time
//     from before Enqueue to the start of its handler is recorded;
//   - for an embedded store (Config.StoreDir), first, the sync floor: small
//     appends to a scratch file in the store's directory, each made
//     durable, back to back and after the latency measurement's pause.
//
// The jobs written by the enqueue measurements are the ones the first two
// drains run, so a run leaves nothing pending behind, and at its end Run
// purges the completed jobs of its queues (unless Config.Keep), untimed:
// left to retention, a default run would hold about half a gigabyte of
// Redis memory for a day. Queue names start with "kyu-bench-" and a run
// id.
package benchmark

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

// JobType is the type of every job the benchmark enqueues.
const JobType = "kyu.bench"

// Run measures b as cfg says; see the package doc. It stops early, with
// ctx's error, when ctx is done.
func Run(ctx context.Context, b backend.Backend, cfg Config) (rep Report, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Report{}, fmt.Errorf("benchmark: %w", err)
	}
	r := &runner{
		b:       b,
		client:  kyu.NewClient(b, kyu.ClientConfig{}),
		cfg:     cfg,
		runID:   strconv.FormatInt(time.Now().UnixNano(), 36),
		payload: payload(cfg.PayloadBytes),
	}
	if !cfg.Keep {
		defer func() {
			cfg.Logger.Info("removing the run's jobs", "queues", len(r.queues))
			if perr := r.purge(ctx); perr != nil {
				err = errors.Join(err, fmt.Errorf("benchmark: remove the run's jobs: %w", perr))
			}
		}()
	}
	rep = Report{
		RunID:        r.runID,
		Started:      time.Now(),
		GoVersion:    runtime.Version(),
		OS:           runtime.GOOS,
		Arch:         runtime.GOARCH,
		CPUs:         runtime.NumCPU(),
		Jobs:         cfg.Jobs,
		PayloadBytes: cfg.PayloadBytes,
		Producers:    cfg.Producers,
		Batch:        cfg.Batch,
		ClaimAhead:   cfg.ClaimAhead,
	}
	log := cfg.Logger

	// The floor is measured first, while the store is fresh and idle.
	if cfg.StoreDir != "" {
		log.Info("measuring the sync floor", "dir", cfg.StoreDir, "samples", cfg.LatencySamples, "pause", cfg.LatencyGap)
		floor, err := measureSyncFloor(ctx, cfg.StoreDir, cfg.LatencySamples, cfg.LatencyGap)
		if err != nil {
			return rep, err
		}
		rep.SyncFloor = &floor
	}

	// The enqueue measurements fill the queues the drains then empty.
	filled := []string{r.queue("enqueue"), r.queue("batch")}

	log.Info("measuring enqueue, one job per call", "jobs", cfg.Jobs, "goroutines", cfg.Producers)
	if rep.Enqueue, err = r.enqueue(ctx, filled[0], 1); err != nil {
		return rep, err
	}
	log.Info("measuring batch enqueue", "jobs", cfg.Jobs, "batch", cfg.Batch, "goroutines", cfg.Producers)
	if rep.BatchEnqueue, err = r.enqueue(ctx, filled[1], cfg.Batch); err != nil {
		return rep, err
	}

	for i, conc := range cfg.Concurrency {
		var q string
		if i < len(filled) {
			q = filled[i]
		} else {
			q = r.queue("drain-" + strconv.Itoa(i))
			log.Info("filling a queue to drain", "queue", q, "jobs", cfg.Jobs)
			if _, err := r.enqueue(ctx, q, cfg.Batch); err != nil {
				return rep, err
			}
		}
		log.Info("measuring drain", "queue", q, "jobs", cfg.Jobs, "concurrency", conc)
		t, err := r.drain(ctx, q, conc)
		if err != nil {
			return rep, err
		}
		rep.Drain = append(rep.Drain, Drain{Concurrency: conc, Throughput: t})
	}
	// With a single concurrency value the second filled queue is left:
	// run it off, unmeasured, so the store keeps nothing pending.
	for _, q := range filled[min(len(cfg.Concurrency), len(filled)):] {
		log.Info("draining the rest, unmeasured", "queue", q)
		if _, err := r.drain(ctx, q, cfg.Concurrency[len(cfg.Concurrency)-1]); err != nil {
			return rep, err
		}
	}

	log.Info("measuring enqueue-to-start latency", "samples", cfg.LatencySamples, "gap", cfg.LatencyGap)
	if rep.Latency, err = r.latency(ctx, r.queue("latency"), cfg.Concurrency[0]); err != nil {
		return rep, err
	}
	return rep, nil
}

// runner carries what every measurement of one Run shares.
type runner struct {
	b       backend.Backend
	client  *kyu.Client
	cfg     Config
	runID   string
	payload []byte
	// queues lists the queues the run has named, for purge.
	queues []string
}

// queue names a fresh queue of this run.
func (r *runner) queue(name string) string {
	q := "kyu-bench-" + r.runID + "-" + name
	r.queues = append(r.queues, q)
	return q
}

// purge deletes the jobs of the run's queues: completed ones, and pending
// ones a run that stopped early left. It runs on a context of its own, so
// that a run cancelled by ctx still cleans up.
func (r *runner) purge(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), purgeTimeout)
	defer cancel()
	var errs []error
	for _, q := range r.queues {
		for _, st := range []kyu.State{kyu.StateCompleted, kyu.StatePending} {
			if _, err := r.client.Purge(ctx, q, st); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// purgeTimeout bounds the purge of a run's jobs.
const purgeTimeout = 5 * time.Minute

// payload returns n bytes of printable filler.
func payload(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = 'a' + byte(i%26)
	}
	return p
}
