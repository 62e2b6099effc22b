package postgres

import (
	"log/slog"
	"time"
)

// Options configure a Store. The zero value is ready to use.
type Options struct {
	// Schema is the PostgreSQL schema holding kyu's tables. Empty means
	// DefaultSchema. A schema= parameter in the URL given to OpenURL sets it.
	Schema string

	// AutoMigrate applies the embedded migrations when the store opens.
	// Without it, Open refuses a schema that is not at this kyu's version
	// (ErrNotMigrated), and `kyu migrate` (or Migrate) brings it there.
	AutoMigrate bool

	// MaxConns bounds the connection pool. Zero means DefaultMaxConns.
	// Subscriptions use one more connection, outside the pool, for LISTEN.
	MaxConns int32

	// ApplicationName tags the store's connections in pg_stat_activity.
	// Empty means "kyu" (or what the URL's application_name says).
	ApplicationName string

	// Logger receives the store's log lines. Nil discards them.
	Logger *slog.Logger

	// MaintenanceLimit bounds one Promote, RecoverLeases or ApplyRetention
	// step called with Limit 0, and so how long one step holds its row
	// locks. Zero means DefaultMaintenanceLimit.
	MaintenanceLimit int

	// VacuumEvery makes the store VACUUM its jobs table itself after every
	// VacuumEvery claimed jobs. Zero means DefaultVacuumEvery when the
	// server's autovacuum is off and never when it is on (autovacuum, with
	// the table's settings from the migration, then does the work);
	// negative means never.
	VacuumEvery int

	// ListenRetry is the pause before the LISTEN connection is opened again
	// after it was lost. Zero means one second.
	ListenRetry time.Duration
}

// Defaults for Options.
const (
	DefaultSchema           = "kyu"
	DefaultMaxConns         = 10
	DefaultMaintenanceLimit = 1000
)

func (o Options) withDefaults() Options {
	if o.Schema == "" {
		o.Schema = DefaultSchema
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
	if o.ListenRetry <= 0 {
		o.ListenRetry = time.Second
	}
	return o
}
