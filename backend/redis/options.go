package redis

import (
	"crypto/tls"
	"log/slog"
	"time"
)

// DefaultPrefix is the key prefix when Options.Prefix is empty.
const DefaultPrefix = "kyu"

// Options say which Redis to use and how. Zero fields take the defaults
// documented on each.
type Options struct {
	// Addrs are host:port addresses: the server, the cluster's seed nodes,
	// or the sentinels. Default 127.0.0.1:6379.
	Addrs []string
	// Cluster talks to a Redis Cluster.
	Cluster bool
	// SentinelMaster, when set, asks the sentinels at Addrs for the
	// primary of this master set.
	SentinelMaster string
	// Username and Password authenticate (AUTH); empty means none.
	Username string
	Password string
	// DB is the database number (standalone and Sentinel only).
	DB int
	// TLS, when set, connects with TLS.
	TLS *tls.Config
	// Prefix starts every key of the store (1 to 64 characters of
	// [A-Za-z0-9._-]); default DefaultPrefix. Stores with different
	// prefixes share a server without seeing each other.
	Prefix string
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger
	// RetryFor is how long a call keeps retrying, with backoff, while the
	// server cannot be reached or is loading (restart, failover); default
	// 30s. The caller's context still bounds every call.
	RetryFor time.Duration
	// DialTimeout bounds connecting to a server; default 5s.
	DialTimeout time.Duration
}

// Defaults.
const (
	DefaultRetryFor    = 30 * time.Second
	DefaultDialTimeout = 5 * time.Second
)

func (o Options) withDefaults() Options {
	if len(o.Addrs) == 0 {
		o.Addrs = []string{"127.0.0.1:6379"}
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RetryFor <= 0 {
		o.RetryFor = DefaultRetryFor
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	return o
}

// validPrefix reports whether p may start keys: 1 to 64 characters of
// [A-Za-z0-9._-] (no colon, so one prefix never begins another's keys).
func validPrefix(p string) bool {
	if len(p) < 1 || len(p) > 64 {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}
