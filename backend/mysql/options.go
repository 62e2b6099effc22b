package mysql

import (
	"log/slog"
	"time"
)

// Options configure a Store. The zero value is ready to use.
type Options struct {
	// Prefix starts the name of every table of the store, so several
	// stores can share a database (MySQL has no schemas inside one). Empty
	// means DefaultPrefix; a prefix= parameter in the URL sets it.
	Prefix string

	// AutoMigrate applies the embedded migrations when the store opens.
	// Without it, Open refuses tables that are not at this kyu's version
	// (ErrNotMigrated), and `kyu migrate` (or Migrate) brings them there.
	AutoMigrate bool

	// MaxConns bounds the connection pool. Zero means DefaultMaxConns.
	MaxConns int

	// Logger receives the store's log lines. Nil discards them.
	Logger *slog.Logger

	// MaintenanceLimit bounds one Promote, RecoverLeases or
	// ApplyRetention step called with Limit 0, and so how long one step
	// holds its row locks. Zero means DefaultMaintenanceLimit.
	MaintenanceLimit int

	// LockWait bounds how long one statement of the store waits for a row
	// lock (innodb_lock_wait_timeout, whole seconds) before the store
	// rolls its transaction back and runs it again. Zero means
	// DefaultLockWait.
	LockWait time.Duration

	// PollMin and PollMax bound the interval at which an idle store polls
	// the queues' versions for wake-ups from other processes: it polls
	// every PollMin after a change and doubles the interval, up to
	// PollMax, while nothing changes. Zero means DefaultPollMin and
	// DefaultPollMax.
	PollMin, PollMax time.Duration
}

// Defaults for Options.
const (
	DefaultPrefix           = "kyu_"
	DefaultMaxConns         = 16
	DefaultMaintenanceLimit = 1000
	DefaultLockWait         = 10 * time.Second
	DefaultPollMin          = 2 * time.Millisecond
	DefaultPollMax          = 16 * time.Millisecond
)

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaintenanceLimit <= 0 {
		o.MaintenanceLimit = DefaultMaintenanceLimit
	}
	if o.LockWait < time.Second {
		o.LockWait = DefaultLockWait
	}
	if o.PollMin <= 0 {
		o.PollMin = DefaultPollMin
	}
	if o.PollMax <= 0 {
		o.PollMax = DefaultPollMax
	}
	if o.PollMax < o.PollMin {
		o.PollMax = o.PollMin
	}
	return o
}

// validPrefix reports whether name is a table prefix this package
// accepts: up to 32 characters of [A-Za-z0-9_], not starting with a digit.
func validPrefix(name string) bool {
	if len(name) < 1 || len(name) > 32 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || i > 0 && c >= '0' && c <= '9'
		if !ok {
			return false
		}
	}
	return true
}
