package kyu

import (
	"math/rand/v2"
	"runtime/debug"
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

// defaultBackoff is the backoff used when WorkerConfig.Backoff is nil, and
// in place of a custom backoff that panics.
var defaultBackoff = ExponentialBackoff(DefaultBackoffBase, DefaultBackoffMax)

// backoff returns the delay before the attempt after the given one of a
// job of type jobType failed with err: the delay asked for by RetryAfter,
// else the type's or the worker's BackoffFunc. A BackoffFunc that panics
// is logged and replaced by the default for this call.
func (w *Worker) backoff(jobType string, attempt int, err error) (d time.Duration) {
	if d, ok := retryDelay(err); ok {
		return d
	}
	f := w.cfg.BackoffByType[jobType]
	if f == nil {
		f = w.cfg.Backoff
	}
	defer func() {
		if p := recover(); p != nil {
			w.log.Error("kyu: backoff function panicked; using the default backoff",
				"type", jobType, "attempt", attempt, "panic", p, "stack", string(debug.Stack()))
			d = defaultBackoff(attempt, err)
		}
	}()
	return f(attempt, err)
}
