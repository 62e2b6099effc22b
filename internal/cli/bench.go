package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/backendurl"
	"github.com/kyuhq/kyu/internal/benchmark"
)

// benchFlags are the flags of `kyu bench`.
type benchFlags struct {
	backendURL     string
	jobs           int
	payload        int
	producers      int
	batch          int
	concurrency    []int
	latencySamples int
	claimAhead     int
	json           bool
	quiet          bool
	keep           bool
}

// newBenchCommand builds `kyu bench`.
func newBenchCommand() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure enqueue and drain throughput and enqueue-to-start latency",
		Long: `Measure a store through the kyu API with default job settings (durable
writes, default retention) and no-op handlers:

  - enqueue: --jobs jobs, one per call, from --producers goroutines;
  - batch enqueue: --jobs jobs, --batch per call, likewise;
  - drain: a worker with each --concurrency handlers runs --jobs waiting
    jobs; timed until every completion is stored;
  - latency: on an idle worker, from before enqueue to handler start.

For the embedded store it first measures the disk's sync floor in the
store's directory: --latency-samples 256-byte appends to a scratch file,
each followed by fdatasync (fsync outside Linux), back to back, then each
after the 5ms pause the latency samples also take. The store syncs once
per enqueue call (or group of calls), so a one-job enqueue and the
latency wait for at least one such sync; the report gives each beside
its floor. Other stores sync on their own servers, if at all, and get no
floor.

On Linux each figure also gives its cpu wait: the share of its time in
which some task on the machine (the benchmark's, the store's or another
process's) was ready to run but waited for a CPU (/proc/pressure/cpu). A
figure taken while it is high says as much about the machine as about the
store; compare runs whose cpu wait is alike.

Without --backend it measures an embedded store in a fresh temporary
directory and removes it afterwards. With --backend it writes into that
store, in queues named kyu-bench-<run id>-*; the jobs end completed, and
the run purges them when it ends (untimed), unless --keep leaves them to
retention (24h by default).

Progress goes to stderr, the results to stdout.`,
		Example: `  kyu bench
  kyu bench --jobs 10000 --concurrency 1,10,100 --json
  kyu bench --backend pebble:///var/tmp/kyu-bench`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.backendURL, "backend", "", "store to measure, as a URL (default: an embedded store in a fresh temporary directory)")
	fl.IntVar(&f.jobs, "jobs", benchmark.DefaultJobs, "jobs per measurement")
	fl.IntVar(&f.payload, "payload", benchmark.DefaultPayloadBytes, "payload size in bytes")
	fl.IntVar(&f.producers, "producers", benchmark.DefaultProducers, "goroutines that enqueue at once")
	fl.IntVar(&f.batch, "batch", benchmark.DefaultBatch, "jobs per call in the batch enqueue")
	fl.IntSliceVar(&f.concurrency, "concurrency", benchmark.DefaultConcurrency(), "handler counts to drain with, one drain each")
	fl.IntVar(&f.latencySamples, "latency-samples", benchmark.DefaultLatencySamples, "jobs timed for the enqueue-to-start latency (and syncs timed each way for the sync floor)")
	fl.IntVar(&f.claimAhead, "claim-ahead", 0, "jobs each draining worker may claim beyond its handlers (WorkerConfig.ClaimAhead)")
	fl.BoolVar(&f.json, "json", false, "print the results as JSON")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "print no progress")
	fl.BoolVar(&f.keep, "keep", false, "leave the run's completed jobs in the store for retention to remove")
	return cmd
}

// config checks the flags and turns them into a benchmark.Config.
func (f benchFlags) config(log *slog.Logger) (benchmark.Config, error) {
	positive := []struct {
		name string
		v    int
	}{{"jobs", f.jobs}, {"producers", f.producers}, {"batch", f.batch}, {"latency-samples", f.latencySamples}}
	for _, p := range positive {
		if p.v < 1 {
			return benchmark.Config{}, usageErrorf("--%s: %d is less than 1", p.name, p.v)
		}
	}
	if f.payload < 0 {
		return benchmark.Config{}, usageErrorf("--payload: %d is negative", f.payload)
	}
	if f.payload > backend.DefaultMaxPayload {
		return benchmark.Config{}, usageErrorf("--payload: %d is over the maximum payload of %d bytes", f.payload, backend.DefaultMaxPayload)
	}
	if f.claimAhead < 0 || f.claimAhead > benchmark.MaxClaimAhead {
		return benchmark.Config{}, usageErrorf("--claim-ahead: %d is outside [0, %d]", f.claimAhead, benchmark.MaxClaimAhead)
	}
	if len(f.concurrency) == 0 {
		return benchmark.Config{}, usageErrorf("--concurrency: give at least one handler count")
	}
	for _, c := range f.concurrency {
		if c < 1 {
			return benchmark.Config{}, usageErrorf("--concurrency: %d is less than 1", c)
		}
	}
	return benchmark.Config{
		Jobs:           f.jobs,
		PayloadBytes:   f.payload,
		Producers:      f.producers,
		Batch:          f.batch,
		Concurrency:    f.concurrency,
		LatencySamples: f.latencySamples,
		ClaimAhead:     f.claimAhead,
		Keep:           f.keep,
		Logger:         log,
	}, nil
}

// runBench opens the store, runs the benchmark and prints the report.
func runBench(ctx context.Context, f benchFlags, stdout, stderr io.Writer) (err error) {
	logOut := stderr
	if f.quiet {
		logOut = io.Discard
	}
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg, err := f.config(log)
	if err != nil {
		return err
	}

	rawURL, label := f.backendURL, describeBackend(f.backendURL)
	if rawURL == "" {
		dir, err := os.MkdirTemp("", "kyu-bench-")
		if err != nil {
			return fmt.Errorf("bench: temporary store: %w", err)
		}
		defer func() {
			if rerr := os.RemoveAll(dir); rerr != nil {
				err = errors.Join(err, fmt.Errorf("bench: remove temporary store: %w", rerr))
			}
		}()
		rawURL, label = dir, "embedded store (pebble) in a temporary directory"
		cfg.Keep = true // the directory goes, and the jobs with it
	}
	if dir, ok := backendurl.EmbeddedDir(rawURL); ok {
		cfg.StoreDir = dir // measure the sync floor there
	}
	b, err := backendurl.Open(ctx, rawURL, backendurl.Options{Logger: log, Token: os.Getenv(tokenEnv)})
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer func() {
		if cerr := b.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("bench: close store: %w", cerr))
		}
	}()

	log.Info("benchmark starting", "backend", label, "jobs", cfg.Jobs)
	rep, err := benchmark.Run(ctx, b, cfg)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	rep.Backend = label
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.WriteText(stdout)
}

// describeBackend names a store for the report without its password.
func describeBackend(raw string) string {
	if !strings.Contains(raw, "://") {
		return "embedded store (pebble) at " + raw
	}
	if u, err := url.Parse(raw); err == nil {
		if strings.EqualFold(u.Scheme, "memory") {
			return "memory://, in memory: nothing persists"
		}
		return u.Redacted()
	}
	return "the given store"
}
