// Package mysql is kyu's MySQL and MariaDB store: a backend.Backend on
// MySQL 8.0 or newer, or MariaDB 10.6 or newer (the first releases with
// FOR UPDATE SKIP LOCKED), through github.com/go-sql-driver/mysql, for
// teams that already run one of them. It is tested on MariaDB only (the
// machine it is built on cannot install MySQL 8); it uses nothing MySQL 8
// lacks. Like the PostgreSQL store it can enqueue inside the
// application's own transaction (EnqueueTx with a *sql.Tx;
// kyu.Client.EnqueueTx reaches it): the job exists if and only if that
// transaction commits.
//
// A store's tables share a prefix (default "kyu_"; several stores may
// share a database with different prefixes), all InnoDB in utf8mb4. They
// are created by embedded, versioned, forward-only migrations: Migrate
// (the `kyu migrate` command) or Options.AutoMigrate applies them, and
// Open refuses tables at another version than this code's, or missing one
// of their tables.
//
// The store's connections run at READ COMMITTED: each statement reads the
// latest committed rows and locks only the rows it touches, with no gap
// locks, so claimers, producers and maintenance do not block one another
// over ranges of an index. Every operation that reads before it writes
// locks the rows it reads (SELECT … FOR UPDATE, in id order) and decides
// in Go, as the contract reads, then writes the outcome of a whole batch
// in a few statements. A deadlock (1213), a lock wait timeout (1205) or a
// duplicate key from a concurrent insert of the same unique key or JID
// (1062) rolls the transaction back, and the store runs the whole
// operation again (at most ten times): nothing of it was applied. In the
// application's transaction (EnqueueTx) the error is the caller's.
//
// Claims take the pending jobs of a queue in claim order with FOR UPDATE
// SKIP LOCKED, so claimers never wait for one another. MySQL has no
// LISTEN/NOTIFY: a step that makes jobs pending wakes the store's own
// subscribers at once and bumps its queues' versions, which the stores of
// other processes poll while they have subscribers (see signals).
//
// The store never reads the database clock for the semantics: every time
// comes from the caller's Now, as the backend contract asks.
package mysql
