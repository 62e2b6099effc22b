package benchmark

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults for the zero fields of Config.
const (
	DefaultJobs           = 100_000
	DefaultPayloadBytes   = 100
	DefaultProducers      = 10
	DefaultBatch          = 100
	DefaultLatencySamples = 1000
	DefaultLatencyGap     = 5 * time.Millisecond
)

// MaxClaimAhead is the most Config.ClaimAhead may be, as for
// kyu.WorkerConfig.ClaimAhead.
const MaxClaimAhead = 10_000

// DefaultConcurrency lists the handler counts drained with by default.
func DefaultConcurrency() []int { return []int{10, 50} }

// Config chooses what Run measures. Zero fields take the defaults above.
type Config struct {
	// Jobs is how many jobs each enqueue and drain measurement moves.
	Jobs int
	// PayloadBytes is the size of every job's payload.
	PayloadBytes int
	// Producers is how many goroutines enqueue at once.
	Producers int
	// Batch is how many jobs one batch enqueue call writes.
	Batch int
	// Concurrency lists the handler counts to drain with, one drain each.
	Concurrency []int
	// LatencySamples is how many single jobs the latency measurement times.
	LatencySamples int
	// ClaimAhead is the draining workers' WorkerConfig.ClaimAhead: how
	// many jobs each may claim beyond its handlers (default none).
	ClaimAhead int
	// LatencyGap is the pause between latency samples, so that the worker
	// is idle (waiting for work) when each job arrives.
	LatencyGap time.Duration
	// StoreDir is the directory of the embedded store measured, when it is
	// one: Run then also measures the disk's sync floor there (SyncFloor),
	// with LatencySamples samples each way. Leave it empty for a store
	// reached over the network, whose syncs, if any, are its server's.
	StoreDir string
	// Keep leaves the run's jobs in the store when it ends; by default Run
	// purges its queues' jobs, which would otherwise stay until retention
	// removes them (a day by default: about half a gigabyte of Redis
	// memory for a run with the default figures).
	Keep bool
	// Logger receives progress and the workers' logs; nil discards them.
	Logger *slog.Logger
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	if c.Jobs == 0 {
		c.Jobs = DefaultJobs
	}
	if c.PayloadBytes == 0 {
		c.PayloadBytes = DefaultPayloadBytes
	}
	if c.Producers == 0 {
		c.Producers = DefaultProducers
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	if len(c.Concurrency) == 0 {
		c.Concurrency = DefaultConcurrency()
	}
	if c.LatencySamples == 0 {
		c.LatencySamples = DefaultLatencySamples
	}
	if c.LatencyGap == 0 {
		c.LatencyGap = DefaultLatencyGap
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate refuses values no measurement can use.
func (c Config) validate() error {
	var errs []error
	if c.Jobs < 1 {
		errs = append(errs, fmt.Errorf("jobs: %d is less than 1", c.Jobs))
	}
	if c.PayloadBytes < 0 {
		errs = append(errs, fmt.Errorf("payload: %d bytes is negative", c.PayloadBytes))
	}
	if c.Producers < 1 {
		errs = append(errs, fmt.Errorf("producers: %d is less than 1", c.Producers))
	}
	if c.Batch < 1 {
		errs = append(errs, fmt.Errorf("batch: %d is less than 1", c.Batch))
	}
	if c.ClaimAhead < 0 || c.ClaimAhead > MaxClaimAhead {
		errs = append(errs, fmt.Errorf("claim ahead: %d is outside [0, %d]", c.ClaimAhead, MaxClaimAhead))
	}
	for _, n := range c.Concurrency {
		if n < 1 {
			errs = append(errs, fmt.Errorf("concurrency: %d is less than 1", n))
		}
	}
	if c.LatencySamples < 0 {
		errs = append(errs, fmt.Errorf("latency samples: %d is negative", c.LatencySamples))
	}
	if c.LatencyGap < 0 {
		errs = append(errs, fmt.Errorf("latency gap: %s is negative", c.LatencyGap))
	}
	return errors.Join(errs...)
}
