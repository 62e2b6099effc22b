package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend/memory"
)

// Defaults of Config.
const (
	DefaultConcurrency     = 10
	DefaultShutdownTimeout = 30 * time.Second
	DefaultKillGrace       = 5 * time.Second
	DefaultQueue           = "default"
	DefaultPrefetch        = 1

	// defaultLease is kyu.WorkerConfig's default Lease.
	defaultLease = 30 * time.Second
)

// Config configures a Daemon. Only Handlers is required.
type Config struct {
	// Concurrency is how many jobs run at once, all queues together.
	// Default 10.
	Concurrency int

	// Queues are the queues served, in strict order when no queue has a
	// weight, else in weighted order; a queue's Max caps its running jobs
	// (see kyu.PoolConfig). Default: the queue "default".
	Queues []kyu.PoolQueue

	// ShutdownTimeout is how long a graceful stop (Stop, Reload, Resume
	// for the quiet generation) lets running jobs finish before their
	// children are sent SIGTERM. Quiet does not limit them.
	// Default 30s; a negative value sends SIGTERM at once.
	ShutdownTimeout time.Duration

	// KillGrace is how long a child sent SIGTERM (at a timeout, a cancel
	// or a shutdown) has before its process group is sent SIGKILL.
	// Default 5s, or half the Lease when that is shorter; less than
	// Lease.
	KillGrace time.Duration

	// MaxJobs, when positive, makes the daemon stop gracefully after that
	// many jobs have run (Done is closed), so that its supervisor starts
	// a fresh one. Jobs claimed past the count are handed back unrun.
	MaxJobs int

	// Lease is the kyu.WorkerConfig.Lease of the daemon's workers.
	// Default kyu's (30s).
	Lease time.Duration

	// PollInterval is the kyu.WorkerConfig.PollInterval. Default kyu's.
	PollInterval time.Duration

	// RegistryInterval is the kyu.WorkerConfig.RegistryInterval: how
	// often the worker refreshes its registry entry, and so how soon it
	// hears a quiet or stop command sent through the API. Default kyu's.
	RegistryInterval time.Duration

	// Prefetch is how many jobs per prefork child (see
	// HandlerConfig.Prefork) the daemon claims beyond Concurrency, so that
	// a child that answers is handed its next job at once, and claims and
	// outcomes reach the store in larger batches. Such a job waits in the
	// daemon, its lease kept, for at most about Prefetch jobs' run times,
	// and its wait counts toward its own timeout; jobs still run at most
	// Concurrency at once. Default 1; negative for none. Raise it for
	// jobs of a millisecond or less; keep it at 1 or none for long jobs,
	// which other workers could start meanwhile.
	Prefetch int

	// Handlers maps each job type to the handler that runs it. A claimed
	// job of another type fails its attempt with that reason. Required.
	Handlers map[string]HandlerConfig

	// WorkerID prefixes the ids of the daemon's workers, one per
	// generation ("ID-g1", "ID-g2"…). Default kyu's "host-pid-random".
	WorkerID string

	// Logger receives the daemon's logs: one line per job start and
	// finish at Info. Default: slog.Default().
	Logger *slog.Logger

	// JobLogLevel is the level of the per-job start and finish lines
	// ("job started", "job finished"). Default slog.LevelInfo. Failures
	// are logged at their own levels (warn for a retry, error for a final
	// failure) whatever it is.
	JobLogLevel slog.Level

	// JobLogOff, when true, logs no per-job start and finish lines.
	JobLogOff bool

	// Guard, if set, is told every child's process group, so that they are
	// killed if the daemon dies (see StartGuardian). Default none.
	Guard Guard
}

// HandlerConfig says how jobs of one type run: in one child process per
// job (the exec runner: Command or Shell), or POSTed to a URL (the http
// runner: URL). Exactly one of Command, Shell and URL is set.
type HandlerConfig struct {
	// Command is the argv of the child, run directly (no shell); a
	// relative program path is resolved against Dir.
	Command []string

	// Shell is a command line run with /bin/sh -c.
	Shell string

	// URL receives each job as a POST of its JSON object: a 2xx answer
	// completes it (the body is the result), 429 or 503 with Retry-After
	// retries it after that delay, any other answer follows Retry. Env
	// and Dir do not apply.
	URL string

	// Prefork, when positive, runs Command (or Shell) as that many
	// long-lived children, each taking one job at a time as a JSON line
	// on its stdin and ending it with {"done":true} or {"error":…} on fd 3
	// (the prefork runner), instead of one process per job.
	Prefork int

	// MaxJobsPerChild, with Prefork, replaces a child after about that
	// many jobs (up to 10% fewer, at random, so that children do not all
	// restart together). Default 0: never.
	MaxJobsPerChild int

	// Timeout, when positive, ends an attempt that runs longer (the child
	// is sent SIGTERM, then SIGKILL after KillGrace) and fails it. A job's
	// own timeout applies too: the shorter wins.
	Timeout time.Duration

	// Env adds to the daemon's environment (and overrides it).
	Env map[string]string

	// Dir is the child's working directory. Default the daemon's.
	Dir string

	// Retry is what an exit code other than 0, 65 and 75, or a death by
	// signal, leads to.
	Retry RetryPolicy
}

// RetryPolicy is a handler's retry policy.
type RetryPolicy struct {
	// NoRetry fails a job for good on an exit code other than 75 (which
	// always asks for a retry) or a death by signal. Default false: such
	// attempts are retried while the job has attempts left.
	NoRetry bool

	// Backoff is "exponential" (the default: BackoffBase doubled with each
	// attempt up to BackoffMax, ±20%) or "fixed" (BackoffBase every
	// time).
	Backoff string

	// BackoffBase is the first delay (exponential) or every delay
	// (fixed). Default 1s; 0 with "fixed" retries at once.
	BackoffBase time.Duration

	// BackoffMax caps an exponential backoff. Default 1h.
	BackoffMax time.Duration
}

// Backoff kinds of RetryPolicy.
const (
	BackoffExponential = "exponential"
	BackoffFixed       = "fixed"
)

// backoffFunc is the kyu backoff of the policy.
func (p RetryPolicy) backoffFunc() kyu.BackoffFunc {
	if p.Backoff == BackoffFixed {
		return kyu.FixedBackoff(p.BackoffBase)
	}
	return kyu.ExponentialBackoff(p.BackoffBase, p.BackoffMax)
}

// WithDefaults returns c with its zero fields set to their defaults; maps
// and slices are copied.
func (c Config) WithDefaults() Config { return c.withDefaults() }

func (c Config) withDefaults() Config {
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if len(c.Queues) == 0 {
		c.Queues = []kyu.PoolQueue{{Name: DefaultQueue}}
	} else {
		c.Queues = slices.Clone(c.Queues)
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.KillGrace == 0 {
		c.KillGrace = min(DefaultKillGrace, c.lease()/2)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Prefetch == 0 {
		c.Prefetch = DefaultPrefetch
	}
	c.Handlers = maps.Clone(c.Handlers)
	return c
}

// Validate reports the first problem of a config, naming the field.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case len(c.Handlers) == 0:
		return errors.New("no handler: a worker must name at least one job type and its command")
	case c.Concurrency < 1:
		return fmt.Errorf("concurrency %d: want at least 1", c.Concurrency)
	case c.KillGrace < 0:
		return fmt.Errorf("kill_grace %s: want 0 or more", c.KillGrace)
	case c.MaxJobs < 0:
		return fmt.Errorf("max_jobs %d: want 0 (no limit) or more", c.MaxJobs)
	case c.Lease < 0:
		return fmt.Errorf("lease %s: want a positive duration", c.Lease)
	case c.KillGrace >= c.lease():
		// kyu abandons a handler one lease past its job's timeout: the
		// group must be gone by then.
		return fmt.Errorf("kill_grace %s: want less than the lease, %s", c.KillGrace, c.lease())
	}
	for _, t := range slices.Sorted(maps.Keys(c.Handlers)) {
		if err := c.Handlers[t].validate(); err != nil {
			return fmt.Errorf("handler %q: %w", t, err)
		}
	}
	// The pool's own checks name queues, weights and caps.
	_, err := kyu.NewWorker(memory.New(), c.workerConfig(nil, ""))
	return err
}

func (h HandlerConfig) validate() error {
	switch {
	case len(h.Command) == 0 && h.Shell == "" && h.URL == "":
		return errors.New("no command: give command (an argv list), a shell line or a url")
	case (len(h.Command) > 0 && h.Shell != "") || (len(h.Command) > 0 && h.URL != "") || (h.Shell != "" && h.URL != ""):
		return errors.New("more than one of command, shell and url: give one")
	case h.URL != "" && !strings.HasPrefix(h.URL, "http://") && !strings.HasPrefix(h.URL, "https://"):
		return fmt.Errorf("url %q: want an http:// or https:// URL", h.URL)
	case len(h.Command) > 0 && h.Command[0] == "":
		return errors.New("command: empty program name")
	case h.Timeout < 0:
		return fmt.Errorf("timeout %s: want 0 (none) or more", h.Timeout)
	case h.Prefork < 0 || h.MaxJobsPerChild < 0:
		return errors.New("prefork and max_jobs_per_child: want 0 or more")
	case h.Prefork > 0 && h.URL != "":
		return errors.New("prefork with a url: prefork runs a command")
	}
	switch h.Retry.Backoff {
	case "", BackoffExponential, BackoffFixed:
	default:
		return fmt.Errorf("backoff %q: want %q or %q", h.Retry.Backoff, BackoffExponential, BackoffFixed)
	}
	if h.Retry.BackoffBase < 0 || h.Retry.BackoffMax < 0 {
		return errors.New("backoff_base and backoff_max: want 0 or more")
	}
	return nil
}

// lease is the workers' lease, its default filled in.
func (c Config) lease() time.Duration {
	if c.Lease == 0 {
		return defaultLease
	}
	return c.Lease
}

// argv is the child's argv.
func (h HandlerConfig) argv() []string {
	if h.Shell != "" {
		return []string{"/bin/sh", "-c", h.Shell}
	}
	return h.Command
}

// ahead is how many jobs the daemon claims beyond Concurrency: Prefetch
// per prefork child. 0 without prefork handlers.
func (c Config) ahead() int {
	n := 0
	for _, h := range c.Handlers {
		if h.Prefork > 0 && h.URL == "" {
			n += h.Prefork
		}
	}
	return n * max(c.Prefetch, 0)
}

// workerConfig is the kyu.WorkerConfig of one generation.
func (c Config) workerConfig(handler kyu.Handler, id string) kyu.WorkerConfig {
	backoffs := make(map[string]kyu.BackoffFunc, len(c.Handlers))
	for t, h := range c.Handlers {
		backoffs[t] = h.Retry.backoffFunc()
	}
	if handler == nil {
		handler = kyu.HandlerFunc(func(ctx context.Context, j *kyu.Job) error { return nil })
	}
	return kyu.WorkerConfig{
		Handler: handler,
		// Jobs claimed ahead wait for a place to run (see
		// generation.ProcessJob).
		Pool:         &kyu.PoolConfig{Concurrency: c.Concurrency + c.ahead(), Queues: slices.Clone(c.Queues)},
		ID:           id,
		Lease:        c.Lease,
		PollInterval: c.PollInterval,
		// Commands sent through the registry go to the daemon (see
		// newGeneration), not to this one generation's worker.
		RegistryInterval: c.RegistryInterval,
		BackoffByType:    backoffs,
		Logger:           c.Logger,
		// The daemon ends its generations itself (see generation.stop):
		// kyu's own grace is only a bound.
		ShutdownGrace: 24 * time.Hour,
	}
}

// Guard is told the process group of every child as it starts and once
// it is gone, so that it can kill the groups left if the daemon dies.
// Env is a variable ("NAME=value") given to every child, which its own
// children inherit: the guard may look for it too (a child can start
// processes before the daemon has told the guard its group).
type Guard interface {
	Add(pgid int)
	Remove(pgid int)
	Env() string
}
