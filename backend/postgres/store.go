package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kyuhq/kyu/backend"
)

// Store is a kyu store in one schema of a PostgreSQL database, as Open
// returns it: a backend.Backend whose every method checks its input first
// (backend.Checked), with the methods of its own (EnqueueTx, Migrate,
// Pool, Schema) beside.
type Store struct {
	backend.Backend
	unchecked
}

// unchecked is the store behind the checks. Embedded, it lends Store its
// own methods, its state and helpers (for the package's tests), never its
// Backend methods, which the checked Backend shadows.
type unchecked struct{ *store }

// store implements backend.Backend on input that backend.Checked has
// checked.
type store struct {
	opts   Options
	log    *slog.Logger
	pool   *pgxpool.Pool
	schema string // quoted, ready to put into SQL
	// channel is the NOTIFY channel of this schema's pending jobs, finished
	// that of its watched jobs ending.
	channel, finished string
	sqls              *statements

	// closeMu is held shared by every operation for its whole run and
	// exclusively by Close, so Close waits for operations in flight.
	closeMu sync.RWMutex
	closed  bool

	// line coalesces concurrent small Enqueue calls (see coalesce.go).
	line enqueueLine
	// waiting holds the claims waiting for an enqueue to fill them (see
	// waitclaim.go).
	waiting waitingClaims

	listen   *listener
	notifier *notifier
	vacuum   *vacuumer // nil when the store leaves vacuuming to autovacuum
}

var _ backend.Backend = (*store)(nil)

// Open connects to the PostgreSQL database named by connString (a
// postgres:// or postgresql:// URL, or a key=value connection string) and
// opens the kyu store in its schema. URL query parameters this package
// reads, and removes before connecting: schema (the schema name, when
// opts.Schema is empty) and automigrate (true or false, overriding
// opts.AutoMigrate). Errors never repeat the password.
func Open(ctx context.Context, connString string, opts Options) (*Store, error) {
	s, err := connect(ctx, connString, opts)
	if err != nil {
		return nil, err
	}
	if err := s.open(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	s.notifier.start()
	s.vacuum.start()
	return &Store{Backend: backend.Checked(s), unchecked: unchecked{s}}, nil
}

// Migrate connects to the database named by connString (read as Open
// reads it), brings the schema to SchemaVersion and disconnects; it
// returns the versions before and after. It is what `kyu migrate` runs.
func Migrate(ctx context.Context, connString string, opts Options) (from, to int, err error) {
	s, err := connect(ctx, connString, opts)
	if err != nil {
		return 0, 0, err
	}
	defer s.pool.Close()
	if _, err := checkServer(ctx, s.pool); err != nil {
		return 0, 0, err
	}
	from, err = s.version(ctx)
	if err != nil && !errors.Is(err, ErrNotMigrated) {
		return 0, 0, err
	}
	if err := s.Migrate(ctx); err != nil {
		return from, from, err
	}
	return from, SchemaVersion(), nil
}

// connect builds a Store with its pool, before any check.
func connect(ctx context.Context, connString string, opts Options) (*store, error) {
	cfg, opts, err := parseConfig(connString, opts)
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if !validSchemaName(opts.Schema) {
		return nil, fmt.Errorf("%w: schema %q is not 1-63 characters of [A-Za-z0-9_] starting with a letter or _", ErrBadURL, opts.Schema)
	}
	cfg.MaxConns = opts.MaxConns
	// Every statement of the store is an index lookup or an ordered index
	// scan. Without fresh statistics (a table autovacuum has not analysed
	// yet) the planner may fetch all pending jobs of a queue with a bitmap
	// scan and sort them to claim ten; this keeps it on the claim index.
	// It applies to the store's own connections only.
	//
	// The statements are prepared once per connection. Their custom plans
	// (the default for the first executions, and whenever the planner
	// thinks them cheaper) cost more to plan than to run: the statements
	// are long CTE chains that touch a few rows. Their generic plans are
	// index lookups whatever the parameters.
	//
	// Set after connecting rather than as startup parameters, which some
	// connection poolers refuse.
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "SET enable_bitmapscan = off; SET plan_cache_mode = force_generic_plan")
		return err
	}
	if opts.ApplicationName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = opts.ApplicationName
	} else if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "kyu"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("kyu/postgres: connect: %w", err)
	}
	s := &store{
		opts:     opts,
		log:      opts.Logger,
		pool:     pool,
		schema:   pgx.Identifier{opts.Schema}.Sanitize(),
		channel:  channelName(opts.Schema),
		finished: finishedChannelName(opts.Schema),
	}
	s.sqls = newStatements(s.schema, s.finished)
	s.listen = newListener(s)
	s.notifier = newNotifier(s)
	return s, nil
}

// open checks the server and the schema, migrating it when asked.
func (s *store) open(ctx context.Context) error {
	autovacuum, err := checkServer(ctx, s.pool)
	if err != nil {
		return err
	}
	every := s.opts.VacuumEvery
	switch {
	case every == 0 && autovacuum:
		every = -1
	case every == 0:
		s.log.Warn("kyu/postgres: the server's autovacuum is off; the store vacuums its jobs table itself",
			"schema", s.opts.Schema, "every_claims", DefaultVacuumEvery)
		every = DefaultVacuumEvery
	}
	s.vacuum = newVacuumer(s, every)
	if s.opts.AutoMigrate {
		if err := s.Migrate(ctx); err != nil {
			return err
		}
	}
	return s.checkSchema(ctx)
}

// Close waits for the operations in flight, ends the claims waiting for
// work (ClaimWait) with ErrClosed, stops the subscriptions and closes the
// connections. Later calls return ErrClosed; a second Close does
// nothing.
func (s *store) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return nil
	}
	s.closed = true
	s.closeMu.Unlock()
	s.waiting.close()
	s.listen.stop()
	s.notifier.stop()
	s.vacuum.stop()
	s.pool.Close()
	return nil
}

// inTx runs fn in a transaction of its own, committed when fn returns nil.
func (s *store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback(ctx) //nolint:errcheck // the first error is the one to report
		return err
	}
	return tx.Commit(ctx)
}

// wakeQueue tells the subscribers of queue, here and in other processes,
// that it got pending jobs.
func (s *store) wakeQueue(queue string) {
	s.listen.signal(queue)
	s.notifier.notify([]string{queue})
}

// begin starts an operation: it fails with ErrClosed after Close, and
// otherwise holds Close off until end.
func (s *store) begin(ctx context.Context) error {
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return backend.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		s.closeMu.RUnlock()
		return err
	}
	return nil
}

// end finishes an operation begun with begin.
func (s *store) end() { s.closeMu.RUnlock() }

// Schema returns the name of the store's schema.
func (s *store) Schema() string { return s.opts.Schema }

// Pool returns the store's connection pool, for tests and tools that need
// the database itself; kyu's tables are in Schema.
func (s *store) Pool() *pgxpool.Pool { return s.pool }

// validSchemaName reports whether name is a schema name this package
// accepts: 1 to 63 characters of [A-Za-z0-9_], not starting with a digit.
func validSchemaName(name string) bool {
	if len(name) < 1 || len(name) > 63 {
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

// channelName is the NOTIFY channel of a schema: channels belong to the
// database, so two schemas must not share one.
func channelName(schema string) string {
	// PostgreSQL cuts identifiers at 63 bytes; two schemas whose names
	// agree that far share a channel, which costs only spurious wake-ups.
	ch := "kyu." + schema
	if len(ch) > 63 {
		ch = ch[:63]
	}
	return ch
}

// finishedChannelName is the NOTIFY channel on which a schema's watched
// jobs announce their end (the payload is the job's id). It differs from
// channelName's even when both are cut at 63 bytes, since a schema name
// has no dot.
func finishedChannelName(schema string) string {
	ch := "kyu.finished." + schema
	if len(ch) > 63 {
		ch = ch[:63]
	}
	return ch
}

// wrap names the operation in an error from the database, turning the
// pool's "closed" error into ErrClosed.
func (s *store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var ve *backend.ValidationError
	var se *backend.StateError
	if errors.As(err, &ve) || errors.As(err, &se) || errors.Is(err, backend.ErrClosed) ||
		errors.Is(err, backend.ErrNotFound) || errors.Is(err, backend.ErrUniqueKeyHeld) {
		return err
	}
	return fmt.Errorf("kyu/postgres: %s: %w", op, err)
}
