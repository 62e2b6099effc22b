// Package postgres is kyu's PostgreSQL store: a backend.Backend on
// PostgreSQL 14 or newer through pgx, for teams that already run
// PostgreSQL, and the one store that can enqueue a job inside the
// application's own transaction (EnqueueTx, with a pgx.Tx or a *sql.Tx;
// kyu.Client.EnqueueTx reaches it): the job exists if and only if that
// transaction commits.
//
// A store lives in one schema (default "kyu"; several stores may share a
// database in different schemas). Its tables are created by embedded,
// versioned, forward-only migrations: Migrate (the `kyu migrate` command)
// or Options.AutoMigrate applies them, and Open refuses a schema at another
// version than this code's.
//
// Enqueue calls of a few jobs each that come while another is on its way
// wait and go together in one transaction, each job with its own caller's
// clock and the outcome of running the calls one after another; an idle
// caller goes at once. EnqueueTx is never coalesced.
//
// Claims take the pending jobs of a queue in claim order with FOR UPDATE
// SKIP LOCKED, so claimers never wait for one another. Completions,
// failures, releases and heartbeats act on a whole batch in one statement
// (completions in two when some of a batch's jobs need more than a plain
// completion). Batches of 20 new jobs or more go in with a binary COPY.
// A job that becomes pending is announced with NOTIFY on a channel named
// after the schema, so idle workers wake within a few milliseconds; a lost
// notification only costs a worker's poll interval.
//
// The lifecycle operations (schema version 2) keep to the same rules: the
// statements that end jobs also decide their retention (backend.Expiry, in
// SQL), honour a requested cancel and add to the per-minute counters;
// WatchFinished marks the watched jobs, and only their end sends a NOTIFY
// (on a second channel, also named after the schema); Stats counts each
// state over its partial index in one statement; List pages in id order.
//
// A job's JID (schema version 5) is a column with a partial unique
// index: jobs without one write no index entry. An enqueue or import with
// JIDs takes a transaction-scoped advisory lock per JID before it reads
// their holders (lock_jids), so a held JID is answered as a duplicate of
// its holder, also when the holder's transaction commits meanwhile, never
// as a unique violation.
//
// The store never reads the database clock for the semantics: every time
// comes from the caller's Now, as the backend contract asks.
package postgres
