package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/kyuhq/kyu/backend"
)

// Store is a kyu store in a MySQL or MariaDB database, its tables named
// with a prefix, as Open returns it: a backend.Backend whose every method
// checks its input first (backend.Checked), with the methods of its own
// (EnqueueTx, Migrate, DB, Prefix) beside.
type Store struct {
	backend.Backend
	unchecked
}

// unchecked is the store behind the checks. Embedded, it lends Store its
// own methods, never its Backend methods, which the checked Backend
// shadows.
type unchecked struct{ *store }

// store implements backend.Backend on input that backend.Checked has
// checked.
type store struct {
	opts   Options
	log    *slog.Logger
	db     *sql.DB
	dbName string
	server server
	sqls   *statements

	// closeMu is held shared by every operation for its whole run and
	// exclusively by Close, so Close waits for operations in flight.
	closeMu sync.RWMutex
	closed  bool

	// line coalesces concurrent small Enqueue calls (see coalesce.go).
	line    enqueueLine
	signals *signals
	watches *watches
	// claimed remembers the queues of the jobs this store has leased.
	claimed *claimedQueues

	// retries counts the transactions run again after a deadlock, a lock
	// wait timeout or a duplicate key (for tests and logs).
	retries atomic.Int64
	// leanCompletes counts the batches leanComplete finished (for tests).
	leanCompletes atomic.Int64
}

var _ backend.Backend = (*store)(nil)

// Open connects to the MySQL or MariaDB database named by rawURL (see
// parseURL for its form) and opens the kyu store whose tables start with
// the prefix. URL query parameters this package reads, and keeps from the
// driver: prefix (when opts.Prefix is empty), automigrate (true or false,
// overriding opts.AutoMigrate) and socket (a Unix socket instead of a
// host). Errors never repeat the password.
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	s, err := connect(ctx, rawURL, opts)
	if err != nil {
		return nil, err
	}
	if s.opts.AutoMigrate {
		if err := s.Migrate(ctx); err != nil {
			s.db.Close()
			return nil, err
		}
	}
	if err := s.checkSchema(ctx); err != nil {
		s.db.Close()
		return nil, err
	}
	s.signals.start()
	return &Store{Backend: backend.Checked(s), unchecked: unchecked{s}}, nil
}

// Migrate connects to the database named by rawURL (read as Open reads
// it), brings the store's tables to SchemaVersion and disconnects; it
// returns the versions before and after. It is what `kyu migrate` runs.
func Migrate(ctx context.Context, rawURL string, opts Options) (from, to int, err error) {
	s, err := connect(ctx, rawURL, opts)
	if err != nil {
		return 0, 0, err
	}
	defer s.db.Close()
	from, err = s.version(ctx)
	if err != nil && !errors.Is(err, ErrNotMigrated) {
		return 0, 0, err
	}
	if err := s.Migrate(ctx); err != nil {
		return from, from, err
	}
	return from, SchemaVersion(), nil
}

// connect builds a store with its pool after checking the server.
func connect(ctx context.Context, rawURL string, opts Options) (*store, error) {
	cfg, opts, err := parseURL(rawURL, opts)
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if !validPrefix(opts.Prefix) {
		return nil, fmt.Errorf("%w: prefix %q is not 1-32 characters of [A-Za-z0-9_] starting with a letter or _", ErrBadURL, opts.Prefix)
	}
	// Statements are sent with their arguments filled in (one round trip
	// each, no prepared statements to keep per connection), in utf8mb4;
	// a few steps send several statements in one round trip.
	cfg.InterpolateParams = true
	cfg.MultiStatements = true
	cfg.Collation = "utf8mb4_bin"
	cfg.Loc = time.UTC
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	probeCfg := cfg.Clone()
	probe, err := mysql.NewConnector(probeCfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	pdb := sql.OpenDB(probe)
	sv, err := checkServer(ctx, pdb, cfg.DBName)
	pdb.Close()
	if err != nil {
		return nil, err
	}
	// READ COMMITTED: every statement reads the latest committed rows and
	// locks only the rows it touches, with no gap locks, so claims that
	// skip locked rows, enqueues that insert beside them and maintenance
	// steps do not block or deadlock one another over ranges of the
	// indexes. Every step that needs more than one statement to agree
	// locks its rows first (SELECT … FOR UPDATE), so it needs no snapshot.
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params[sv.isolationVar()] = "'READ-COMMITTED'"
	cfg.Params["innodb_lock_wait_timeout"] = strconv.Itoa(int(opts.LockWait / time.Second))
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(opts.MaxConns)
	db.SetMaxIdleConns(opts.MaxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := &store{opts: opts, log: opts.Logger, db: db, dbName: cfg.DBName, server: sv}
	s.sqls = newStatements(opts.Prefix)
	s.signals = newSignals(s)
	s.watches = newWatches(s)
	s.claimed = newClaimedQueues()
	return s, nil
}

// Close waits for the operations in flight, stops the subscriptions and
// closes the connections. Later calls return ErrClosed; a second Close
// does nothing.
func (s *store) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return nil
	}
	s.closed = true
	s.closeMu.Unlock()
	s.signals.stop()
	s.watches.stop()
	return s.db.Close()
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

// maxTxAttempts bounds how often inTx runs a transaction that the server
// rolled back for a deadlock or a lock wait timeout.
const maxTxAttempts = 10

// inTx runs fn in a transaction of its own, committed when fn returns
// nil. A deadlock (1213), a lock wait timeout (1205) or a duplicate key
// from a concurrent insert (1062) rolls the whole transaction back and
// runs fn again, after a short random pause: fn must start from nothing
// each time (it is the whole operation, reads included). Any other error
// is returned as it is.
func (s *store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.retrying(ctx, func() error { return s.txOnce(ctx, fn) })
}

// retrying runs fn, a whole transaction or a single statement, again
// after errors that roll it back, as inTx says.
func (s *store) retrying(ctx context.Context, fn func() error) error {
	var err error
	for attempt := 1; ; attempt++ {
		err = fn()
		if err == nil || !retryable(err) || attempt == maxTxAttempts || ctx.Err() != nil {
			return err
		}
		s.retries.Add(1)
		s.log.Debug("kyu/mysql: running a transaction again", "attempt", attempt+1, "err", err)
		pause := time.Duration(rand.IntN(1000*attempt)) * time.Microsecond
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
	}
}

func (s *store) txOnce(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback() //nolint:errcheck // the first error is the one to report
		return err
	}
	return tx.Commit()
}

// Prefix returns the prefix of the store's tables.
func (s *store) Prefix() string { return s.opts.Prefix }

// DB returns the store's connection pool, for tests and tools that need
// the database itself.
func (s *store) DB() *sql.DB { return s.db }

// wrap names the operation in an error from the database.
func (s *store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var ve *backend.ValidationError
	var se *backend.StateError
	if errors.As(err, &ve) || errors.As(err, &se) || errors.Is(err, backend.ErrClosed) ||
		errors.Is(err, backend.ErrNotFound) || errors.Is(err, backend.ErrUniqueKeyHeld) ||
		errors.Is(err, backend.ErrJobActive) {
		return err
	}
	if strings.Contains(err.Error(), "sql: database is closed") {
		return backend.ErrClosed
	}
	return fmt.Errorf("kyu/mysql: %s: %w", op, err)
}
