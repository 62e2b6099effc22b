package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path"
	"strings"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

// Defaults of Config.
const (
	DefaultAddr                = "127.0.0.1:7420"
	DefaultMaxLongPolls        = 1024
	DefaultMaxWait             = 60 * time.Second
	DefaultReadHeaderTimeout   = 10 * time.Second
	DefaultIdleTimeout         = 2 * time.Minute
	DefaultMaintenanceInterval = time.Second
	DefaultIdempotencyTTL      = 10 * time.Minute
	DefaultIdempotencyEntries  = 10000
	DefaultIdempotencyBytes    = 64 << 20
	DefaultMaxBatch            = 10000
	DefaultMaxResponseBytes    = 16 << 20
	DefaultEventInterval       = 5 * time.Second
	DefaultMaxMetricLabels     = 200
	DefaultBodyTimeout         = 60 * time.Second
	DefaultMaxConns            = 4096
	DefaultSessionTTL          = 12 * time.Hour
)

// Config configures a Server. Zero fields take the documented defaults.
type Config struct {
	// Backend is the store the server serves. Required. The server does not
	// close it.
	Backend backend.Backend
	// Addr is the listen address; default 127.0.0.1:7420.
	Addr string
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// every /api/ and /metrics request.
	Token string
	// Insecure allows a non-loopback Addr without a Token. Without it such
	// a server refuses to start; with it the server logs a warning.
	Insecure bool
	// AllowedHosts are the host names, besides localhost, 127.0.0.1 and
	// ::1, that a request's Host header may name (any port) when no Token
	// is set: the name of a proxy in front of the server, say. A server
	// without a token that listens on loopback, or that has AllowedHosts,
	// refuses other Host names with 403, so that a web page cannot reach
	// it under a name of its own (DNS rebinding). With a Token the Host
	// is not checked.
	AllowedHosts []string
	// TLSCertFile and TLSKeyFile, when both set, make the server speak
	// HTTPS.
	TLSCertFile string
	TLSKeyFile  string
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger

	// BasePath is the path prefix the server answers under, for a proxy
	// that forwards a path such as /kyu to it: "/kyu" serves the dashboard
	// at /kyu/ and the API at /kyu/api/v1. Default "" (the root). Requests
	// outside it answer 404.
	BasePath string
	// ReadOnly refuses, with 403, every request that changes state except
	// the worker side (claim, leases, heartbeats, completions, failures,
	// releases, progress and logs, the worker registry and the
	// maintenance steps workers run), so workers keep running while people
	// only look. The dashboard then shows no actions.
	ReadOnly bool
	// Store describes the store for the dashboard: its kind and URL,
	// without secrets. Default: its Go type.
	Store string
	// SessionTTL is how long a dashboard login lasts; default 12h.
	SessionTTL time.Duration

	// MaxPayload bounds one job's payload in bytes; default
	// backend.DefaultMaxPayload.
	MaxPayload int
	// MaxBodyBytes bounds a request body; beyond it the answer is 413.
	// Default: the base64 length of MaxPayload plus 1 MiB, so that one
	// payload of the full size fits in either of its encodings.
	MaxBodyBytes int64
	// MaxBodyBytesInFlight bounds the bytes of large request bodies (over
	// 1 MiB each) that handlers work on at once: a request whose large body
	// has been read waits, before it is decoded, until the bodies in hand
	// leave room for it (a body over the bound waits for all of it).
	// Decoding a body and writing what it holds costs a few times its
	// size, so this bounds the server's memory under large requests.
	// Bodies are not held back while they arrive, so a slow client delays
	// no one. Default twice MaxBodyBytes: two of the largest requests at
	// once.
	MaxBodyBytesInFlight int64
	// MaxBatch bounds the jobs of one batch enqueue; beyond it the answer
	// is 413. Default 10000.
	MaxBatch int
	// MaxResponseBytes bounds the jobs of one answer to a list or a claim,
	// counted as their JSON; default 16 MiB. A page stops early, with a
	// next_cursor right after its last job; a claim stops early, hands the
	// jobs that do not fit back to their queue and says "truncated". An
	// answer always holds at least one job, whatever its size; the answer
	// of a single job (get, wait) is not bounded by it.
	MaxResponseBytes int
	// MaxLongPolls bounds the requests waiting at once (claims with a wait,
	// job waits, event streams); default 1024. Past it a claim or a wait
	// answers at once, and a new stream is refused with 503.
	MaxLongPolls int
	// MaxWait caps the wait of a claim and the timeout of a job wait;
	// default 60s.
	MaxWait time.Duration
	// ReadHeaderTimeout and IdleTimeout end slow and idle connections;
	// defaults 10s and 2m.
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	// BodyTimeout bounds the reading of one request body, from the end of
	// its headers; default 60s. A body not in by then fails with 408 and
	// its connection is closed. It does not bound the handling that
	// follows (long-polls and streams run on).
	BodyTimeout time.Duration
	// MaxConns bounds the connections open at once; default 4096. Past it
	// new connections wait in the listen backlog until one closes.
	MaxConns int
	// MaintenanceInterval is how often the server promotes due jobs,
	// recovers expired leases and applies retention while the servers
	// and workers sharing its store elect it to (internal/maintenance);
	// default 1s, negative to run no maintenance (then its remote workers
	// get none either).
	MaintenanceInterval time.Duration
	// IdempotencyTTL, IdempotencyEntries and IdempotencyBytes bound the
	// answers remembered for Idempotency-Key: default 10 minutes, 10000
	// answers and 64 MiB of them (the oldest go first). An answer larger
	// than IdempotencyBytes is not remembered.
	IdempotencyTTL     time.Duration
	IdempotencyEntries int
	IdempotencyBytes   int
	// EventInterval is how often the event stream reports queue counts and
	// worker changes; default 5s.
	EventInterval time.Duration
	// MaxMetricLabels bounds the series of each job metric family
	// (kyu_jobs_enqueued_total, kyu_jobs_completed_total,
	// kyu_jobs_failed_total, kyu_job_duration_seconds), whose queue and
	// type labels come from callers; default 200. The first (queue, type)
	// pairs seen get a series of their own while room lasts; later pairs
	// are counted under type "other" of their queue when that queue has a
	// series, and under queue "other", type "other" when not. A family
	// never holds more than MaxMetricLabels series, "other" ones included.
	MaxMetricLabels int
	// Backoff decides when a job whose attempt failed without a retry_at
	// (and not final) runs again: the failure time plus Backoff of the
	// attempt number. Default: the backoff a kyu.Worker uses by default,
	// kyu.ExponentialBackoff(kyu.DefaultBackoffBase, kyu.DefaultBackoffMax)
	// (1s, doubling, up to 1h, ±20%). kyu.FixedBackoff(0) retries at once.
	Backoff kyu.BackoffFunc

	// FaktoryAddr, when set, is a TCP address where the server also
	// speaks the Faktory work protocol (package server/faktory), so
	// Faktory's clients push and run jobs over the same store. Off when
	// empty.
	FaktoryAddr string
	// FaktoryPassword is the password Faktory's clients must prove;
	// default Token. Off loopback one is required, as a Token is for Addr
	// (Insecure allows going without).
	FaktoryPassword string
	// FaktoryAllowFlush lets a Faktory client's FLUSH wipe the store.
	FaktoryAllowFlush bool

	// Clock is for tests only; the kyu binary never sets it. When set, it is
	// the server's clock, and a request's Kyu-Now header, when present, is
	// taken as the caller's clock for that request (as the storage contract
	// lets an in-process caller pass Now). When nil, the server's system
	// clock is every caller's clock and the header is ignored.
	Clock kyu.Clock
}

// withDefaults returns c with its zero fields set to the defaults.
func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxPayload <= 0 {
		c.MaxPayload = backend.DefaultMaxPayload
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = int64((c.MaxPayload+2)/3*4) + 1<<20
	}
	if c.MaxBodyBytesInFlight <= 0 {
		c.MaxBodyBytesInFlight = 2 * c.MaxBodyBytes
	}
	if c.MaxLongPolls <= 0 {
		c.MaxLongPolls = DefaultMaxLongPolls
	}
	if c.MaxWait <= 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaintenanceInterval == 0 {
		c.MaintenanceInterval = DefaultMaintenanceInterval
	}
	if c.IdempotencyTTL <= 0 {
		c.IdempotencyTTL = DefaultIdempotencyTTL
	}
	if c.IdempotencyEntries <= 0 {
		c.IdempotencyEntries = DefaultIdempotencyEntries
	}
	if c.IdempotencyBytes <= 0 {
		c.IdempotencyBytes = DefaultIdempotencyBytes
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.EventInterval <= 0 {
		c.EventInterval = DefaultEventInterval
	}
	if c.MaxMetricLabels <= 0 {
		c.MaxMetricLabels = DefaultMaxMetricLabels
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.Store == "" && c.Backend != nil {
		c.Store = fmt.Sprintf("%T", c.Backend)
	}
	if c.Backoff == nil {
		c.Backoff = kyu.ExponentialBackoff(kyu.DefaultBackoffBase, kyu.DefaultBackoffMax)
	}
	if c.FaktoryPassword == "" {
		c.FaktoryPassword = c.Token
	}
	return c
}

// validate checks a Config with its defaults applied.
func (c Config) validate() error {
	if c.Backend == nil {
		return errors.New("server: Config.Backend is required")
	}
	return c.checkListen()
}

// checkBasePath accepts "" or a clean path that starts with "/" and does
// not end with one.
func checkBasePath(p string) error {
	if p == "" {
		return nil
	}
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || path.Clean(p) != p || strings.ContainsAny(p, "?#%\"<> ") {
		return fmt.Errorf("server: base path %q: want a clean path such as /kyu (a leading slash, none at the end)", p)
	}
	return nil
}

// CheckListen reports whether a server may listen as c says: the address,
// the token it needs beyond loopback, and the TLS files. New checks it
// too; a caller calls it first to refuse a bad address before it opens a
// store.
func (c Config) CheckListen() error {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.FaktoryPassword == "" {
		c.FaktoryPassword = c.Token
	}
	return c.checkListen()
}

// checkListen is CheckListen of a Config with its defaults applied.
func (c Config) checkListen() error {
	if err := checkBasePath(c.BasePath); err != nil {
		return err
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("server: TLS needs both a certificate and a key file")
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return fmt.Errorf("server: listen address %q: %w", c.Addr, err)
	}
	if c.Token == "" && !c.Insecure && !isLoopback(host) {
		return fmt.Errorf("server: refusing to listen on %q without a token: anyone who can reach it could run and delete jobs; set a token (--token or KYU_TOKEN), listen on 127.0.0.1, or pass --insecure", c.Addr)
	}
	if c.FaktoryAddr != "" {
		fhost, _, err := net.SplitHostPort(c.FaktoryAddr)
		if err != nil {
			return fmt.Errorf("server: Faktory listen address %q: %w", c.FaktoryAddr, err)
		}
		if c.FaktoryPassword == "" && !c.Insecure && !isLoopback(fhost) {
			return fmt.Errorf("server: refusing to speak the Faktory protocol on %q without a password: anyone who can reach it could run and delete jobs; set a token (--token or KYU_TOKEN) or --faktory-password, listen on 127.0.0.1, or pass --insecure", c.FaktoryAddr)
		}
	}
	return nil
}

// addrHost is the host part of a listen address ("" when it has none).
func addrHost(addr string) string {
	host, _, _ := net.SplitHostPort(addr)
	return host
}

// isLoopback reports whether host names only this machine.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
