package faktory

import (
	"errors"
	"log/slog"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

// Defaults of Config.
const (
	// DefaultAddr is the port Faktory's clients try first.
	DefaultAddr = "127.0.0.1:7419"
	// DefaultMaxLine bounds one command line: a PUSH of a payload of the
	// largest default size fits, with room for the rest of the job.
	DefaultMaxLine = backend.DefaultMaxPayload + 1<<20
	// DefaultFetchWait is how long FETCH waits for a job before it answers
	// nil, as Faktory's own server does.
	DefaultFetchWait = 2 * time.Second
	// DefaultHandshakeTimeout bounds the time from accept to HELLO.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultMaxBatch bounds the jobs of one PUSHB.
	DefaultMaxBatch = 10000
	// WorkerDeadAfter is how long a worker may stay silent (no HELLO, no
	// BEAT) before the registry shows it dead; Faktory's clients beat
	// every 15 seconds.
	WorkerDeadAfter = 60 * time.Second
	// WorkerExpireAfter is how long a silent worker's entry stays listed.
	WorkerExpireAfter = time.Hour
)

// Config configures a Listener. Zero fields take the defaults above.
type Config struct {
	// Backend is the store served. Required; the Listener does not close it.
	Backend backend.Backend
	// Addr is the TCP address to listen on; default DefaultAddr.
	Addr string
	// Password, when set, is required of every client: HI carries a salt
	// and an iteration count, and HELLO must carry the matching pwdhash.
	Password string
	// AllowFlush lets FLUSH wipe the store; without it FLUSH is refused.
	AllowFlush bool
	// Logger receives the listener's logs; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// RetryAt is when a job whose attempt failed (FAIL) runs again, given
	// the failure time, the attempt number and the error. Default: now
	// plus kyu's default exponential backoff.
	RetryAt func(now time.Time, attempt int, err error) time.Time
	// MaxLine bounds a command line in bytes; a longer line is skipped and
	// refused, and the connection stays usable. Default DefaultMaxLine.
	MaxLine int
	// MaxPayload bounds one job's args in bytes; default
	// backend.DefaultMaxPayload.
	MaxPayload int
	// MaxBatch bounds the jobs of one PUSHB; default DefaultMaxBatch.
	MaxBatch int
	// FetchWait is how long FETCH waits for a job; default 2s.
	FetchWait time.Duration
	// HandshakeTimeout bounds the handshake; default 10s.
	HandshakeTimeout time.Duration
}

// withDefaults returns c with its zero fields set.
func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.RetryAt == nil {
		backoff := kyu.ExponentialBackoff(kyu.DefaultBackoffBase, kyu.DefaultBackoffMax)
		c.RetryAt = func(now time.Time, attempt int, err error) time.Time {
			return now.Add(backoff(attempt, err))
		}
	}
	if c.MaxLine <= 0 {
		c.MaxLine = DefaultMaxLine
	}
	if c.MaxPayload <= 0 {
		c.MaxPayload = backend.DefaultMaxPayload
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.FetchWait <= 0 {
		c.FetchWait = DefaultFetchWait
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	return c
}

// validate checks a Config with its defaults applied.
func (c Config) validate() error {
	if c.Backend == nil {
		return errors.New("faktory: Config.Backend is required")
	}
	return nil
}
