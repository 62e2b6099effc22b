package kyu

import (
	"math/rand/v2"
	"time"
)

// BackoffFunc returns how long to wait before the next attempt of a job
// whose attempt number attempt (1 for the first) failed with err.
type BackoffFunc func(attempt int, err error) time.Duration

// Defaults of the backoff a Worker uses when WorkerConfig.Backoff is nil.
const (
	DefaultBackoffBase = time.Second
	DefaultBackoffMax  = time.Hour
	// BackoffJitter is the fraction by which ExponentialBackoff varies each
	// delay at random, both ways.
	BackoffJitter = 0.2
)

// ExponentialBackoff waits base after the first attempt and doubles the wait
// with each further attempt, up to max; each delay is then varied at random
// by up to ±20% (BackoffJitter), so jobs that failed together do not retry
// together. The result is never negative and, before jitter, never over max.
// A base <= 0 means 1s and a max <= 0 means 1h.
func ExponentialBackoff(base, max time.Duration) BackoffFunc {
	if base <= 0 {
		base = DefaultBackoffBase
	}
	if max <= 0 {
		max = DefaultBackoffMax
	}
	if max < base {
		max = base
	}
	return func(attempt int, _ error) time.Duration {
		d := base
		for i := 1; i < attempt && d < max; i++ {
			d *= 2
		}
		if d > max || d <= 0 {
			d = max
		}
		jitter := (rand.Float64()*2 - 1) * BackoffJitter
		return time.Duration(float64(d) * (1 + jitter))
	}
}

// FixedBackoff waits d before every retry; FixedBackoff(0) retries at once.
func FixedBackoff(d time.Duration) BackoffFunc {
	if d < 0 {
		d = 0
	}
	return func(int, error) time.Duration { return d }
}
