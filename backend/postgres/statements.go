package postgres

import (
	"fmt"
	"strings"

	"github.com/kyuhq/kyu/backend"
)

// statements holds the SQL of every operation with the store's schema
// filled in. Placeholders: {{s}} is the quoted schema; {{cols j}} the job
// columns with the alias j; {{keys d}} the unique-key bookkeeping for the
// jobs a CTE named d deleted; {{delete_at STATE}} the retention deadline of
// a job (alias j) becoming final in STATE at $1. The parameters of each
// are listed above its template.
type statements struct {
	get, delete, deleteState           string
	claim, step                        string
	heartbeat, complete, fail, release string
	recover, retention, forgetKeys     string
	insert, insertQuiet, takeKeys      string
	existing, notify                   string
	insertOne                          string
}

// newStatements fills in the templates for one schema.
func newStatements(schema string) *statements {
	f := func(tmpl string) string { return fill(tmpl, schema) }
	return &statements{
		get:         f(`SELECT {{cols}} FROM {{s}}.jobs WHERE id = $1`),
		delete:      f(sqlDelete),
		deleteState: f(`SELECT state FROM {{s}}.jobs WHERE id = $1`),
		claim:       f(sqlClaim),
		step:        f(sqlStep),
		heartbeat:   f(sqlHeartbeat),
		complete:    f(sqlComplete),
		fail:        f(sqlFail),
		release:     f(sqlRelease),
		recover:     f(sqlRecover),
		retention:   f(sqlRetention),
		forgetKeys:  f(sqlForgetKeys),
		insert:      f(sqlInsert),
		insertQuiet: f(sqlInsertQuiet),
		insertOne:   f(sqlInsertOne),
		notify:      `SELECT count(*) FROM (SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q) x`,
		takeKeys:    f(sqlTakeKeys),
		existing:    f(`SELECT id::text FROM {{s}}.jobs WHERE id = ANY($1::uuid[])`),
	}
}

// fill expands the placeholders of tmpl.
func fill(tmpl, schema string) string {
	r := strings.NewReplacer(
		"{{cols}}", cols(""),
		"{{cols j}}", cols("j"),
		"{{delete_at completed}}", deleteAt(backend.StateCompleted),
		"{{delete_at failed}}", deleteAt(backend.StateFailed),
		"{{delete_at cancelled}}", deleteAt(backend.StateCancelled),
		"{{keys d}}", keysAfterDelete("d"),
	)
	// Expand the fragments first: they hold {{s}} too.
	return strings.ReplaceAll(r.Replace(tmpl), "{{s}}", schema)
}

// deleteAt is the SQL for when retention deletes a job (alias j) that
// becomes final in state at $1: NULL to keep it forever, else FinishedAt
// plus its own retention or the state's default.
func deleteAt(state backend.State) string {
	keep, _ := backend.RetainDefault.Keep(state)
	return fmt.Sprintf(`CASE WHEN j.retention_ns = %d THEN NULL
		WHEN j.retention_ns > 0 THEN $1::timestamptz + (j.retention_ns / 1000) * interval '1 microsecond'
		ELSE $1::timestamptz + interval '%d microseconds' END`, int64(backend.RetainForever), keep.Microseconds())
}

// keysAfterDelete is the CTE pair that keeps unique keys right when the
// CTE named d (returning id, queue, unique_key, final_state) deleted jobs:
// a key held while its job lives is forgotten; a key held for a UniqueFor
// period remembers the state its job had.
func keysAfterDelete(d string) string {
	return strings.NewReplacer("%d", d).Replace(`%d_free AS (
		DELETE FROM {{s}}.unique_keys u USING %d
		WHERE u.queue = %d.queue AND u.key = %d.unique_key AND u.job_id = %d.id AND u.held_until IS NULL
	), %d_held AS (
		UPDATE {{s}}.unique_keys u SET job_state = %d.final_state FROM %d
		WHERE u.queue = %d.queue AND u.key = %d.unique_key AND u.job_id = %d.id AND u.held_until IS NOT NULL
	)`)
}

// sqlGet etc. are the templates; $-parameters are listed above each.

// sqlDelete: $1 id. Deletes a job that is not active; returns how many.
const sqlDelete = `WITH d AS (
	DELETE FROM {{s}}.jobs j WHERE j.id = $1 AND j.state <> 'active'
	RETURNING j.id, j.queue, j.unique_key, j.state AS final_state
), {{keys d}}
SELECT count(*) FROM d`

// sqlClaim: $1 now, $2 queue, $3 max, $4 worker id, $5 lease expiry.
// Leases up to $3 pending jobs of one queue in claim order, skipping rows
// other claimers hold and jobs past their deadline.
const sqlClaim = `WITH c AS (
	SELECT id FROM {{s}}.jobs
	WHERE state = 'pending' AND queue = $2 AND (deadline IS NULL OR deadline > $1)
	ORDER BY priority DESC, run_at, id
	LIMIT $3
	FOR UPDATE SKIP LOCKED
)
UPDATE {{s}}.jobs j
SET state = 'active', attempt = j.attempt + 1, lease_token = j.lease_token + 1,
	worker_id = $4, started_at = $1, lease_expires_at = $5
FROM c WHERE j.id = c.id
RETURNING {{cols j}}`

// sqlStep: $1 now, $2 queues (NULL for every queue), $3 limit, $4 channel.
// Promotes due scheduled and retry jobs to pending and cancels waiting jobs
// past their deadline, at most $3 in all; notifies the queues that got
// pending jobs. Returns (promoted, cancelled).
const sqlStep = `WITH cand AS (
	SELECT id FROM {{s}}.jobs
	WHERE state IN ('scheduled', 'retry') AND run_at <= $1 AND ($2::text[] IS NULL OR queue = ANY($2))
	UNION
	SELECT id FROM {{s}}.jobs
	WHERE deadline IS NOT NULL AND state IN ('scheduled', 'pending', 'retry') AND deadline <= $1
		AND ($2::text[] IS NULL OR queue = ANY($2))
), t AS (
	SELECT j.id, (j.deadline IS NOT NULL AND j.deadline <= $1) AS expired
	FROM {{s}}.jobs j
	WHERE j.id = ANY (ARRAY(SELECT id FROM cand))
		AND ((j.state IN ('scheduled', 'retry') AND j.run_at <= $1)
			OR (j.deadline IS NOT NULL AND j.state IN ('scheduled', 'pending', 'retry') AND j.deadline <= $1))
	LIMIT $3
	FOR UPDATE SKIP LOCKED
), pr AS (
	UPDATE {{s}}.jobs j SET state = 'pending'
	FROM t WHERE j.id = t.id AND NOT t.expired
	RETURNING j.queue
), cn AS (
	UPDATE {{s}}.jobs j
	SET state = 'cancelled', cancel_reason = 'deadline', finished_at = $1, delete_at = {{delete_at cancelled}}
	FROM t WHERE j.id = t.id AND t.expired AND j.retention_ns <> -1
	RETURNING j.id
), d AS (
	DELETE FROM {{s}}.jobs j USING t
	WHERE j.id = t.id AND t.expired AND j.retention_ns = -1
	RETURNING j.id, j.queue, j.unique_key, 'cancelled'::text AS final_state
), {{keys d}}, n AS (
	SELECT pg_notify($4, q) FROM (SELECT DISTINCT queue AS q FROM pr) x
)
SELECT (SELECT count(*) FROM pr), (SELECT count(*) FROM cn) + (SELECT count(*) FROM d), (SELECT count(*) FROM n)`

// leaseItems is the CTE of the live leases among $2 ids and $3 tokens at
// $1, locked in id order (so two batches never wait on each other in a
// circle). Extra per-item columns come from the unnest in the caller.
const liveLeases = `t AS (
	SELECT j.id, j.queue, j.attempt, j.max_attempts, j.retention_ns, i.*
	FROM {{s}}.jobs j JOIN items i ON i.item_id = j.id AND i.token = j.lease_token
	WHERE j.state = 'active' AND j.lease_expires_at > $1
	ORDER BY j.id
	FOR UPDATE OF j
)`

// sqlHeartbeat: $1 now, $2 ids, $3 tokens, $4 new expiry. Returns the
// ids whose leases were extended.
const sqlHeartbeat = `WITH items AS (
	SELECT * FROM unnest($2::uuid[], $3::bigint[]) AS i(item_id, token)
), ` + liveLeases + `
UPDATE {{s}}.jobs j SET lease_expires_at = $4 FROM t WHERE j.id = t.id
RETURNING j.id::text`

// sqlComplete: $1 now, $2 ids, $3 tokens, $4 results. Returns the ids
// completed (or deleted, under RetainNone).
const sqlComplete = `WITH items AS (
	SELECT * FROM unnest($2::uuid[], $3::bigint[], $4::bytea[]) AS i(item_id, token, res)
), ` + liveLeases + `, up AS (
	UPDATE {{s}}.jobs j
	SET state = 'completed', result = t.res, finished_at = $1, lease_expires_at = NULL, worker_id = NULL,
		delete_at = {{delete_at completed}}
	FROM t WHERE j.id = t.id AND t.retention_ns <> -1
	RETURNING j.id
), d AS (
	DELETE FROM {{s}}.jobs j USING t
	WHERE j.id = t.id AND t.retention_ns = -1
	RETURNING j.id, j.queue, j.unique_key, 'completed'::text AS final_state
), {{keys d}}
SELECT id::text FROM up UNION ALL SELECT id::text FROM d`

// sqlFail: $1 now, $2 ids, $3 tokens, $4 messages, $5 stacks, $6 retry
// times, $7 final flags, $8 now as JSON text, $9 channel. Returns the ids
// acted on, and ” per notified queue.
const sqlFail = `WITH items AS (
	SELECT * FROM unnest($2::uuid[], $3::bigint[], $4::text[], $5::text[], $6::timestamptz[], $7::bool[])
		AS i(item_id, token, message, stack, retry_at, final)
), ` + liveLeases + `, n0 AS (
	SELECT t.*, CASE WHEN t.final OR t.attempt >= t.max_attempts THEN 'failed'
		WHEN t.retry_at > $1 THEN 'retry' ELSE 'pending' END AS next
	FROM t
), up AS (
	UPDATE {{s}}.jobs j
	SET state = n0.next,
		errors = coalesce(j.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
			'attempt', j.attempt, 'at', $8::text, 'kind', 'failed', 'message', n0.message, 'stack', n0.stack)),
		lease_expires_at = NULL, worker_id = NULL,
		run_at = CASE n0.next WHEN 'retry' THEN n0.retry_at WHEN 'pending' THEN $1 ELSE j.run_at END,
		finished_at = CASE WHEN n0.next = 'failed' THEN $1 END,
		delete_at = CASE WHEN n0.next = 'failed' THEN {{delete_at failed}} END
	FROM n0 WHERE j.id = n0.id AND NOT (n0.next = 'failed' AND n0.retention_ns = -1)
	RETURNING j.id, j.queue, j.state
), d AS (
	DELETE FROM {{s}}.jobs j USING n0
	WHERE j.id = n0.id AND n0.next = 'failed' AND n0.retention_ns = -1
	RETURNING j.id, j.queue, j.unique_key, 'failed'::text AS final_state
), {{keys d}}, n AS (
	SELECT pg_notify($9, q) FROM (SELECT DISTINCT queue AS q FROM up WHERE state = 'pending') x
)
SELECT id::text FROM up UNION ALL SELECT id::text FROM d UNION ALL SELECT '' FROM n`

// sqlRelease: $1 now, $2 ids, $3 tokens, $4 now as JSON text, $5 channel.
// Returns the ids released, and ” per notified queue.
const sqlRelease = `WITH items AS (
	SELECT * FROM unnest($2::uuid[], $3::bigint[]) AS i(item_id, token)
), ` + liveLeases + `, up AS (
	UPDATE {{s}}.jobs j
	SET state = 'pending', attempt = j.attempt - 1, lease_expires_at = NULL, worker_id = NULL,
		errors = coalesce(j.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
			'attempt', j.attempt, 'at', $4::text, 'kind', 'interrupted', 'message', 'released'))
	FROM t WHERE j.id = t.id
	RETURNING j.id, j.queue
), n AS (
	SELECT pg_notify($5, q) FROM (SELECT DISTINCT queue AS q FROM up) x
)
SELECT id::text FROM up UNION ALL SELECT '' FROM n`

// sqlRecover: $1 now, $2 limit, $3 now as JSON text, $4 channel. Ends up
// to $2 expired leases. Returns (recovered, failed).
const sqlRecover = `WITH t AS (
	SELECT id, attempt >= max_attempts AS exhausted, retention_ns FROM {{s}}.jobs
	WHERE state = 'active' AND lease_expires_at <= $1
	ORDER BY lease_expires_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED
), up AS (
	UPDATE {{s}}.jobs j
	SET state = CASE WHEN t.exhausted THEN 'failed' ELSE 'pending' END,
		errors = coalesce(j.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
			'attempt', j.attempt, 'at', $3::text, 'kind', 'lease_expired', 'message', 'lease expired')),
		lease_expires_at = NULL, worker_id = NULL,
		finished_at = CASE WHEN t.exhausted THEN $1 END,
		delete_at = CASE WHEN t.exhausted THEN {{delete_at failed}} END
	FROM t WHERE j.id = t.id AND NOT (t.exhausted AND t.retention_ns = -1)
	RETURNING j.queue, j.state
), d AS (
	DELETE FROM {{s}}.jobs j USING t
	WHERE j.id = t.id AND t.exhausted AND t.retention_ns = -1
	RETURNING j.id, j.queue, j.unique_key, 'failed'::text AS final_state
), {{keys d}}, n AS (
	SELECT pg_notify($4, q) FROM (SELECT DISTINCT queue AS q FROM up WHERE state = 'pending') x
)
SELECT (SELECT count(*) FROM up) + (SELECT count(*) FROM d),
	(SELECT count(*) FROM up WHERE state = 'failed') + (SELECT count(*) FROM d),
	(SELECT count(*) FROM n)`

// sqlRetention: $1 now, $2 limit. Deletes up to $2 final jobs whose
// retention has run out; returns how many.
const sqlRetention = `WITH t AS (
	SELECT id FROM {{s}}.jobs WHERE delete_at <= $1
	ORDER BY delete_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED
), d AS (
	DELETE FROM {{s}}.jobs j USING t WHERE j.id = t.id
	RETURNING j.id, j.queue, j.unique_key, j.state AS final_state
), {{keys d}}
SELECT count(*) FROM d`

// sqlForgetKeys: $1 now, $2 limit. Forgets up to $2 unique keys whose
// UniqueFor period has ended; returns how many.
const sqlForgetKeys = `WITH t AS (
	SELECT queue, key FROM {{s}}.unique_keys WHERE held_until <= $1
	LIMIT $2
	FOR UPDATE SKIP LOCKED
), d AS (
	DELETE FROM {{s}}.unique_keys u USING t WHERE u.queue = t.queue AND u.key = t.key
	RETURNING 1
)
SELECT count(*) FROM d`

// sqlInsert: $1.. $16 one array per column, $17 created at, $18 channel.
// Writes new jobs and notifies the queues that got pending ones, once the
// transaction commits.
const sqlInsert = `WITH ins AS (
	INSERT INTO {{s}}.jobs (id, queue, type, payload, title, priority, state, max_attempts, run_at,
		timeout_ns, deadline, unique_key, unique_for_ns, tags, metadata, retention_ns, created_at)
	SELECT i.*, $17::timestamptz FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bytea[], $5::text[],
		$6::smallint[], $7::text[], $8::int[], $9::timestamptz[], $10::bigint[], $11::timestamptz[],
		$12::text[], $13::bigint[], $14::jsonb[], $15::jsonb[], $16::bigint[]) AS i
	RETURNING queue, state
)
SELECT count(*) FROM (SELECT pg_notify($18, q) FROM (SELECT DISTINCT queue AS q FROM ins WHERE state = 'pending') x) y`

// sqlInsertQuiet: sqlInsert without the notifications ($18 is unused and
// absent), for Enqueue, which hands them to the store's notifier after the
// commit instead. (A transaction that notifies holds a server-wide lock
// from before its commit record is flushed until it is done, so notifying
// commits cannot share a flush: at thousands of enqueues per second that
// lock, not the disk, sets the pace.)
const sqlInsertQuiet = `INSERT INTO {{s}}.jobs (id, queue, type, payload, title, priority, state, max_attempts, run_at,
	timeout_ns, deadline, unique_key, unique_for_ns, tags, metadata, retention_ns, created_at)
SELECT i.*, $17::timestamptz FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bytea[], $5::text[],
	$6::smallint[], $7::text[], $8::int[], $9::timestamptz[], $10::bigint[], $11::timestamptz[],
	$12::text[], $13::bigint[], $14::jsonb[], $15::jsonb[], $16::bigint[]) AS i`

// sqlInsertOne: sqlInsertQuiet for one job, with one parameter per
// column: arrays of one cost more to build and take apart than the row.
const sqlInsertOne = `INSERT INTO {{s}}.jobs (id, queue, type, payload, title, priority, state, max_attempts, run_at,
	timeout_ns, deadline, unique_key, unique_for_ns, tags, metadata, retention_ns, created_at)
VALUES ($1::uuid, $2, $3, $4, $5, $6::smallint, $7, $8::int, $9, $10::bigint, $11, $12, $13::bigint, $14::jsonb, $15::jsonb, $16::bigint, $17)`

// sqlTakeKeys: $1 item indexes, $2 queues, $3 keys, $4 job ids, $5 held
// until (NULL while the job lives), $6 now. Takes each free key for its
// job, in the order given; returns, per item, the holder when the key was
// held (NULLs when taken).
const sqlTakeKeys = `SELECT i.idx, h.holder::text, h.holder_state
FROM unnest($1::int[], $2::text[], $3::text[], $4::uuid[], $5::timestamptz[]) AS i(idx, q, k, id, until),
	LATERAL {{s}}.take_unique_key(i.q, i.k, i.id, i.until, $6) h`
