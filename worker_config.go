package kyu

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// Defaults of WorkerConfig.
const (
	defaultConcurrency         = 10
	defaultLease               = 30 * time.Second
	defaultMaxClaimBatch       = 50
	defaultPollInterval        = time.Second
	defaultShutdownGrace       = 30 * time.Second
	defaultMaintenanceInterval = time.Second
	defaultRegistryInterval    = 10 * time.Second
)

// Upper bounds of WorkerConfig's durations: a lease must end within the
// range of times a store keeps, and a worker must poll and maintain its
// queues now and then.
const (
	maxLease               = 24 * time.Hour
	maxPollInterval        = time.Hour
	maxMaintenanceInterval = time.Hour
	maxRegistryInterval    = time.Hour
	maxShutdownGrace       = 24 * time.Hour
	// NoShutdownGrace as WorkerConfig.ShutdownGrace makes Shutdown cancel
	// running jobs and hand them back at once.
	NoShutdownGrace = time.Duration(-1)
	// maxClaimAhead bounds WorkerConfig.ClaimAhead.
	maxClaimAhead = 10_000
)

// WorkerConfig configures a Worker. Only Handler is required; every other
// field has the default named in its comment.
type WorkerConfig struct {
	// Handler runs every job; usually a *Mux. Required.
	Handler Handler

	// Queues maps each queue to serve with a pool of its own to its
	// concurrency: how many of its jobs may run at once. Default
	// {"default": 10} when Pool is nil too.
	Queues map[string]int

	// Pool, if set, serves more queues with one shared number of handlers,
	// in strict or weighted order, each queue optionally capped (see
	// PoolConfig). A queue is either in Queues or in Pool.
	Pool *PoolConfig

	// ID names this worker in the store (Job.WorkerID). Default
	// "host-pid-random".
	ID string

	// Lease is how long a claim holds a job without a heartbeat; a worker
	// that dies loses its jobs to another after at most this long.
	// Default 30s, at most 24h.
	//
	// A handler whose lease has not been renewed by the time it is within
	// max(1s, Lease/10) of its expiry (less for leases of a few seconds:
	// at most (Lease-HeartbeatInterval)/2) has its context
	// cancelled with the cause ErrLeaseLost, and its outcome is dropped,
	// so that it does not overlap with a new attempt elsewhere. Lease is
	// also the grace a handler gets past its job's timeout: one that has
	// not returned by Timeout+Lease is abandoned (its attempt failed and
	// retried, its slot freed, its goroutine left to itself).
	Lease time.Duration

	// HeartbeatInterval is how often the leases of running jobs are
	// extended; it must be positive and at most Lease/2, so that one
	// failed heartbeat is survived. Default Lease/3.
	HeartbeatInterval time.Duration

	// ClaimBatch is the most jobs one claim call may take. Default, per
	// queue (or pool), the smaller of its concurrency and 50.
	ClaimBatch int

	// ClaimAhead is how many jobs each queue (or pool) may hold claimed
	// beyond its concurrency, waiting for a handler to return: while its
	// handlers are all busy, its next claim is made and committed, so that
	// the store's commit (a disk sync in the embedded store, a round trip
	// to a server) overlaps the handlers' work instead of coming between
	// one batch and the next. A job's timeout starts when its handler
	// starts; while it waits its lease is renewed with the others; it
	// counts against its queue's cap (PoolQueue.Max); and Shutdown (or
	// Quiet) hands the jobs still waiting back to their queue at once,
	// their attempt not counted but recorded as interrupted, as for
	// handlers Shutdown interrupts. A queue claims ahead only while its handlers run
	// shorter than 10ms on average (so not before its first ones have
	// returned): a job claimed ahead of long ones would wait about as
	// long as they run, while another worker might have run it at once.
	// Worth it for short jobs on a store whose claims take a while (a
	// round trip, a sync): one claim's worth (ClaimBatch) is a good value.
	// At most 10,000. Default 0: no job is claimed before a handler is
	// free for it.
	ClaimAhead int

	// PollInterval is how often an idle queue is polled when no wake-up
	// signal arrives from the backend, and so, while the backend gives
	// none (a subscription that failed is retried every few seconds at
	// most), how late a new job may start. Default 1s, at most 1h.
	PollInterval time.Duration

	// ShutdownGrace is how long Shutdown waits for running jobs before it
	// cancels them and hands them back to the queue. Default 30s, at
	// most 24h; NoShutdownGrace (any negative value) cancels them at once.
	ShutdownGrace time.Duration

	// Backoff chooses the delay before a failed job's next attempt.
	// Default ExponentialBackoff(1s, 1h): 1s, 2s, 4s … up to 1h, ±20%.
	// A backoff that panics is logged as an error and the default is used
	// for that attempt. A retry time past the range of times a store keeps
	// (see backend.MaxTime) is clamped to its end.
	Backoff BackoffFunc

	// BackoffByType overrides Backoff for the job types it names.
	BackoffByType map[string]BackoffFunc

	// Clock gives every time the worker hands the backend. Default the
	// system clock. Handler timeouts and the worker's own intervals run on
	// real time whatever the Clock says.
	Clock Clock

	// Logger receives the worker's logs. Default: warnings and errors as
	// text on stderr. A handler's panic and a job that failed for good
	// are logged at Error, an attempt that will be retried at Info.
	Logger *slog.Logger

	// MaintenanceInterval is how often the worker promotes due scheduled
	// and retry jobs, recovers expired leases and applies retention,
	// while the workers and servers sharing its store elect it to; the
	// others stand by. Default 1s.
	MaintenanceInterval time.Duration

	// DisableMaintenance keeps the worker out of that election: it never
	// runs maintenance. Over backend/remote it runs none anyway.
	DisableMaintenance bool

	// MaxLogLines caps the log lines a job keeps (Log, Logf), over all its
	// attempts: the first ones are kept, the rest counted in
	// Job.LogsDropped. Default 0: the store's default,
	// backend.DefaultMaxLogLines (1000); at most backend.LogLinesLimit
	// (10,000).
	MaxLogLines int

	// RegistryInterval is how often the worker refreshes its entry in the
	// store's worker registry (Client.Workers) with the jobs it runs and its
	// counters. An entry not refreshed for 3 intervals shows as dead, and
	// expires after an hour (or 3 intervals, if longer). Default 10s, at
	// most 1h.
	RegistryInterval time.Duration

	// OnCommand, when set, is called with each command given to the worker
	// through the registry (Client.QuietWorker, Client.StopWorker, the
	// dashboard, POST /api/v1/workers/{id}/quiet or /stop), once per
	// command, in a goroutine of its own, instead of the worker obeying it
	// itself: the program decides (a daemon quiets or stops its own
	// runners, then calls Worker.Quiet or Worker.Shutdown). When nil, the
	// worker obeys: WorkerCommandQuiet calls Quiet, WorkerCommandStop
	// Shutdown (Done tells the program). Commands arrive with the
	// registry refresh, every RegistryInterval.
	OnCommand func(cmd WorkerCommand)

	// Periodic lists jobs the worker enqueues on a schedule (cron or
	// interval). Any number of workers may list the same ones: each tick is
	// enqueued once. A schedule that does not parse makes NewWorker fail.
	// The worker waits for each tick on its Clock, reading it at least
	// every PollInterval, and enqueues the tick when it is due.
	Periodic []PeriodicJob

	// Version is the version the worker gives in the registry. Default
	// Version(): kyu's module version, or "dev".
	Version string
}

// withDefaults returns a copy of c with every zero field set to its
// default. Maps are copied, so the caller may change its own afterwards.
func (c WorkerConfig) withDefaults() WorkerConfig {
	if c.Pool != nil {
		p := *c.Pool
		p.Queues = slices.Clone(p.Queues)
		c.Pool = &p
	}
	if len(c.Queues) == 0 && c.Pool == nil {
		c.Queues = map[string]int{backend.DefaultQueue: defaultConcurrency}
	} else {
		q := make(map[string]int, len(c.Queues))
		for name, n := range c.Queues {
			q[name] = n
		}
		c.Queues = q
	}
	if c.ID == "" {
		c.ID = defaultWorkerID()
	}
	if c.Lease == 0 {
		c.Lease = defaultLease
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = c.Lease / 3
	}
	if c.PollInterval == 0 {
		c.PollInterval = defaultPollInterval
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = defaultShutdownGrace
	}
	if c.Backoff == nil {
		c.Backoff = ExponentialBackoff(DefaultBackoffBase, DefaultBackoffMax)
	}
	if c.BackoffByType != nil {
		m := make(map[string]BackoffFunc, len(c.BackoffByType))
		for t, f := range c.BackoffByType {
			m[t] = f
		}
		c.BackoffByType = m
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	if c.Logger == nil {
		c.Logger = defaultLogger(os.Stderr)
	}
	if c.MaintenanceInterval == 0 {
		c.MaintenanceInterval = defaultMaintenanceInterval
	}
	if c.RegistryInterval == 0 {
		c.RegistryInterval = defaultRegistryInterval
	}
	if c.Version == "" {
		c.Version = Version()
	}
	return c
}

// validate reports the first problem of a config that has its defaults.
func (c WorkerConfig) validate() error {
	switch {
	case c.Handler == nil:
		return errors.New("kyu: WorkerConfig.Handler is required")
	case c.Lease < 0 || c.Lease > maxLease:
		return fmt.Errorf("kyu: WorkerConfig.Lease %s is outside (0, %s]", c.Lease, maxLease)
	case c.HeartbeatInterval <= 0 || c.HeartbeatInterval > c.Lease/2:
		return fmt.Errorf("kyu: WorkerConfig.HeartbeatInterval %s must be positive and at most half of Lease %s", c.HeartbeatInterval, c.Lease)
	case c.ClaimBatch < 0:
		return fmt.Errorf("kyu: WorkerConfig.ClaimBatch %d is negative", c.ClaimBatch)
	case c.ClaimAhead < 0 || c.ClaimAhead > maxClaimAhead:
		return fmt.Errorf("kyu: WorkerConfig.ClaimAhead %d is outside [0, %d]", c.ClaimAhead, maxClaimAhead)
	case c.PollInterval < 0 || c.PollInterval > maxPollInterval:
		return fmt.Errorf("kyu: WorkerConfig.PollInterval %s is outside (0, %s]", c.PollInterval, maxPollInterval)
	case c.ShutdownGrace > maxShutdownGrace:
		return fmt.Errorf("kyu: WorkerConfig.ShutdownGrace %s is over %s", c.ShutdownGrace, maxShutdownGrace)
	case c.MaintenanceInterval < 0 || c.MaintenanceInterval > maxMaintenanceInterval:
		return fmt.Errorf("kyu: WorkerConfig.MaintenanceInterval %s is outside (0, %s]", c.MaintenanceInterval, maxMaintenanceInterval)
	case c.MaxLogLines < 0 || c.MaxLogLines > backend.LogLinesLimit:
		return fmt.Errorf("kyu: WorkerConfig.MaxLogLines %d is outside [0, %d]", c.MaxLogLines, backend.LogLinesLimit)
	case c.RegistryInterval < 0 || c.RegistryInterval > maxRegistryInterval:
		return fmt.Errorf("kyu: WorkerConfig.RegistryInterval %s is outside (0, %s]", c.RegistryInterval, maxRegistryInterval)
	case len(c.ID) > 256:
		return fmt.Errorf("kyu: WorkerConfig.ID is %d bytes, at most 256", len(c.ID))
	}
	for _, name := range c.queueNames() {
		if !backend.ValidQueueName(name) {
			return fmt.Errorf("kyu: WorkerConfig.Queues: %q is not 1-128 characters of [A-Za-z0-9._:-]", name)
		}
		if n := c.Queues[name]; n < 1 {
			return fmt.Errorf("kyu: WorkerConfig.Queues: queue %q has concurrency %d, want at least 1", name, n)
		}
	}
	if c.Pool != nil {
		if err := c.Pool.validate(c.Queues); err != nil {
			return err
		}
	}
	for t, f := range c.BackoffByType {
		if f == nil {
			return fmt.Errorf("kyu: WorkerConfig.BackoffByType: nil backoff for type %q", t)
		}
	}
	return nil
}

// queueNames lists the configured queues in sorted order.
func (c WorkerConfig) queueNames() []string {
	names := make([]string, 0, len(c.Queues))
	for name := range c.Queues {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// servedQueues lists every queue the worker serves: those of Queues in
// sorted order, then those of Pool in its order.
func (c WorkerConfig) servedQueues() []string {
	names := c.queueNames()
	if c.Pool != nil {
		for _, q := range c.Pool.Queues {
			names = append(names, q.Name)
		}
	}
	return names
}

// concurrency is how many handlers the worker may run at once, in all.
func (c WorkerConfig) concurrency() int {
	n := 0
	for _, q := range c.Queues {
		n += q
	}
	if c.Pool != nil {
		n += c.Pool.Concurrency
	}
	return n
}

// claimBatch is the most jobs one claim may take for a pool (or queue) of
// the given concurrency.
func (c WorkerConfig) claimBatch(concurrency int) int {
	n := c.ClaimBatch
	if n == 0 {
		n = defaultMaxClaimBatch
	}
	return min(n, concurrency)
}

// leaseMargin is how long before its known expiry an unrenewed lease is
// given up: max(1s, Lease/10), the 1 s covering the clock skew allowed
// between processes (docs/architecture.md), but at most half of the time
// between a renewal and the lease's end (Lease-HeartbeatInterval), so
// that a lease renewed on time is never given up, even when the next
// heartbeat is late by up to that much. Only short leases (under about
// 3 s with the default heartbeat) reach that bound.
func (c WorkerConfig) leaseMargin() time.Duration {
	return min(max(time.Second, c.Lease/10), (c.Lease-c.HeartbeatInterval)/2)
}

// timeoutGrace is how long past its job's timeout a handler may run before
// the worker abandons it: one Lease.
func (c WorkerConfig) timeoutGrace() time.Duration { return c.Lease }

// defaultWorkerID is "host-pid-random".
func defaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// defaultLogger is the Logger of a WorkerConfig that sets none: warnings
// and errors as text on out.
func defaultLogger(out io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
