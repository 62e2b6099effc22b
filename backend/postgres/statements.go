package postgres

import (
	"fmt"
	"strings"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// statements holds the SQL of every operation with the store's schema
// filled in. Placeholders: {{s}} is the quoted schema; {{cols j}} the job
// columns with the alias j ({{listcols}} those a listing returns); {{keys
// d}} the bookkeeping (unique keys, log lines) for the jobs a CTE named d
// deleted; {{notify j}} and {{notify final j}} a NOTIFY on the finish
// channel of a deleted job, or of an updated job now final, that someone
// watches. Finishing statements compute a job's retention with effRetention,
// expiresAt and deleteNow. The parameters of each are listed above its
// template.
type statements struct {
	get, delete, deleteState           string
	claim, claimBounded, claimTyped    string
	step                               string
	heartbeat, complete, fail, release string
	completeLean                       string
	recover, retention, forgetKeys     string
	insert, insertQuiet, takeKeys      string
	existing, notify                   string
	insertOne, insertClaimed           string
	insertClaimedOne                   string
	insertAt, takeKeysAt               string
	getJID, lockJIDs                   string

	lockJob, queueRetention, finishWaiting string
	requestCancel, retry, runNow, state    string
	updateQueue                            string
	// By state: the state is written into the statement (it is one of
	// seven names), so that under generic plans the planner can still use
	// the partial index of that state.
	retryCandidates, purge                 map[backend.State]string
	watch, notifyFinished, report, takeKey string
	statsCounts, statsQueues               string
	statsMinutes, statsTotals, foldMinutes string
	statsQueueMinutes, dropQueueMinutes    string
	commandWorker                          string
	registerWorker, deregisterWorker       string
	workers, forgetWorkers                 string
}

// newStatements fills in the templates for one schema, whose finished
// jobs are announced on the channel finished.
func newStatements(schema, finished string) *statements {
	f := func(tmpl string) string { return fill(tmpl, schema, finished) }
	return &statements{
		get:              f(sqlGet),
		delete:           f(sqlDelete),
		deleteState:      f(`SELECT state FROM {{s}}.jobs WHERE id = $1`),
		claim:            f(sqlClaim),
		claimBounded:     f(sqlClaimBounded),
		claimTyped:       f(sqlClaimTyped),
		step:             f(sqlStep()),
		heartbeat:        f(sqlHeartbeat),
		complete:         f(sqlComplete()),
		completeLean:     f(sqlCompleteLean()),
		fail:             f(sqlFail()),
		release:          f(sqlRelease()),
		recover:          f(sqlRecover()),
		retention:        f(sqlRetention),
		forgetKeys:       f(sqlForgetKeys),
		insert:           f(sqlInsert),
		insertQuiet:      f(sqlInsertQuiet),
		insertOne:        f(sqlInsertOne),
		insertClaimed:    f(sqlInsertClaimed(false)),
		insertClaimedOne: f(sqlInsertClaimed(true)),
		notify:           `SELECT count(*) FROM (SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q) x`,
		takeKeys:         f(sqlTakeKeys),
		insertAt:         f(sqlInsertAt),
		takeKeysAt:       f(sqlTakeKeysAt),
		existing:         f(`SELECT id::text FROM {{s}}.jobs WHERE id = ANY($1::uuid[])`),
		getJID:           f(sqlGetJID),
		lockJIDs:         f(sqlLockJIDs),

		lockJob:         f(`SELECT state, queue, retention_ns, cancel_requested, watched, coalesce(unique_key, ''), unique_for_ns FROM {{s}}.jobs WHERE id = $1 FOR UPDATE`),
		queueRetention:  f(`SELECT retain_completed, retain_failed, retain_cancelled FROM {{s}}.queues WHERE name = $1`),
		finishWaiting:   f(sqlFinishWaiting),
		requestCancel:   f(`UPDATE {{s}}.jobs SET cancel_requested = true WHERE id = $1 RETURNING {{cols}}`),
		retry:           f(sqlRetry),
		runNow:          f(`UPDATE {{s}}.jobs SET state = 'pending', run_at = $2 WHERE id = $1 AND state IN ('scheduled', 'retry') RETURNING {{cols}}`),
		state:           f(`SELECT state FROM {{s}}.jobs WHERE id = $1`),
		retryCandidates: byState(f, sqlRetryCandidates),
		purge:           byState(f, sqlPurge),
		updateQueue:     f(sqlUpdateQueue),
		watch:           f(`UPDATE {{s}}.jobs SET watched = true WHERE id = ANY($1::uuid[]) AND NOT watched RETURNING queue, state = 'pending'`),
		notifyFinished:  `SELECT pg_notify($1, $2)`,
		report:          f(sqlReport),
		takeKey:         f(`SELECT holder::text FROM {{s}}.take_unique_key($1, $2, $3::uuid, NULL, $4)`),
		statsCounts:     f(sqlStatsCounts),
		statsQueues:     f(`SELECT name, paused, retain_completed, retain_failed, retain_cancelled FROM {{s}}.queues`),
		statsMinutes:    f(`SELECT minute, sum(processed)::bigint, sum(failed)::bigint FROM {{s}}.counters WHERE minute >= $1 AND minute <= $2 GROUP BY minute`),
		statsTotals:     f(`SELECT coalesce(sum(processed), 0)::bigint, coalesce(sum(failed), 0)::bigint FROM {{s}}.counters`),
		foldMinutes:     f(sqlFoldMinutes),
		statsQueueMinutes: f(`SELECT queue, minute, sum(processed)::bigint, sum(failed)::bigint FROM {{s}}.queue_counters
			WHERE minute >= $1 AND minute <= $2 GROUP BY queue, minute`),
		dropQueueMinutes: f(`DELETE FROM {{s}}.queue_counters WHERE minute < $1`),
		// The entry's command (info's "command") survives a refresh.
		registerWorker: f(`INSERT INTO {{s}}.workers AS w (id, expires_at, info) VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE
			SET expires_at = excluded.expires_at,
				info = excluded.info || jsonb_strip_nulls(jsonb_build_object('command', w.info->'command'))
			RETURNING coalesce(info->>'command', '')`),
		commandWorker: f(`UPDATE {{s}}.workers SET info = jsonb_set(info, '{command}', to_jsonb(
				CASE WHEN info->>'command' = 'stop' THEN 'stop' ELSE $2::text END))
			WHERE id = $1 AND expires_at > $3 RETURNING info`),
		deregisterWorker: f(`DELETE FROM {{s}}.workers WHERE id = $1`),
		workers:          f(`SELECT info FROM {{s}}.workers WHERE expires_at > $1 ORDER BY id`),
		forgetWorkers:    f(`DELETE FROM {{s}}.workers WHERE expires_at <= $1`),
	}
}

// byState fills in tmpl once per state, with {{state}} the state's name as
// a literal.
func byState(f func(string) string, tmpl string) map[backend.State]string {
	m := map[backend.State]string{}
	for _, st := range backend.States() {
		m[st] = f(strings.ReplaceAll(tmpl, "{{state}}", quoteLiteral(string(st))))
	}
	return m
}

// fill expands the placeholders of tmpl.
func fill(tmpl, schema, finished string) string {
	notify := func(cond string) string {
		return `CASE WHEN ` + cond + ` THEN pg_notify({{fin}}, j.id::text) END`
	}
	r := strings.NewReplacer(
		"{{cols}}", cols("", false),
		"{{cols j}}", cols("j", false),
		"{{listcols}}", cols("", true),
		"{{keys d}}", keysAfterDelete("d"),
		"{{notify j}}", notify("j.watched"),
		"{{notify final j}}", notify("j.watched AND j.state IN ('completed', 'failed', 'cancelled')"),
	)
	// Expand the fragments first: they hold {{s}} and {{fin}} too.
	out := r.Replace(tmpl)
	out = strings.ReplaceAll(out, "{{fin}}", quoteLiteral(finished))
	return strings.ReplaceAll(out, "{{s}}", schema)
}

// quoteLiteral makes s a SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// effRetention is the SQL for the retention that applies to a job whose own
// retention is the expression job, in queue, becoming final in state: its
// own unless RetainDefault, else its queue's override for state (0, the
// default, when the queue has no settings) — backend.Expiry's order.
func effRetention(job, queue, state string) string {
	return fmt.Sprintf(`(CASE WHEN %[1]s <> 0 THEN %[1]s ELSE coalesce((SELECT CASE %[3]s
		WHEN 'completed' THEN qs.retain_completed WHEN 'failed' THEN qs.retain_failed
		WHEN 'cancelled' THEN qs.retain_cancelled END
		FROM {{s}}.queues qs WHERE qs.name = %[2]s), 0) END)`, job, queue, state)
}

// deleteNow is the SQL for backend.Expiry's deleteNow, given a job's
// effective retention eff, its final state and whether it has a result.
func deleteNow(eff, state, hasResult string) string {
	return fmt.Sprintf(`(%s = %d AND NOT (%s = 'completed' AND %s))`, eff, int64(backend.RetainNone), state, hasResult)
}

// expiresAt is the SQL for backend.Expiry's at, given a job's effective
// retention eff and its final state at $1 (NULL: kept forever). Times from
// the end of the range on mean forever, as backend.InTimeRange says.
func expiresAt(eff, state string) string {
	def := func(s backend.State) int64 {
		keep, _ := backend.RetainDefault.Keep(s)
		return keep.Microseconds()
	}
	at := fmt.Sprintf(`(CASE WHEN %[1]s = %[2]d THEN $1::timestamptz + interval '%[3]d microseconds'
		WHEN %[1]s = %[4]d THEN NULL
		WHEN %[1]s > 0 THEN $1::timestamptz + (%[1]s / 1000) * interval '1 microsecond'
		WHEN %[5]s = 'failed' THEN $1::timestamptz + interval '%[6]d microseconds'
		WHEN %[5]s = 'cancelled' THEN $1::timestamptz + interval '%[7]d microseconds'
		ELSE $1::timestamptz + interval '%[8]d microseconds' END)`,
		eff, int64(backend.RetainNone), backend.ResultGrace.Microseconds(), int64(backend.RetainForever),
		state, def(backend.StateFailed), def(backend.StateCancelled), def(backend.StateCompleted))
	return fmt.Sprintf(`(CASE WHEN %[1]s >= %[2]s THEN NULL ELSE %[1]s END)`, at, quoteLiteral(backend.MaxTime().Format(time.RFC3339))+"::timestamptz")
}

// keysAfterDelete is the CTE trio that tidies up when the CTE named d
// (returning id, queue, unique_key, final_state) deleted jobs: a key held
// while its job lives is forgotten; a key held for a UniqueFor period
// remembers the state its job had; the job's log lines go.
func keysAfterDelete(d string) string {
	return strings.NewReplacer("%d", d).Replace(`%d_free AS (
		DELETE FROM {{s}}.unique_keys u USING %d
		WHERE u.queue = %d.queue AND u.key = %d.unique_key AND u.job_id = %d.id AND u.held_until IS NULL
	), %d_held AS (
		UPDATE {{s}}.unique_keys u SET job_state = %d.final_state FROM %d
		WHERE u.queue = %d.queue AND u.key = %d.unique_key AND u.job_id = %d.id AND u.held_until IS NOT NULL
	), %d_logs AS (
		DELETE FROM {{s}}.job_logs l USING %d WHERE l.job_id = %d.id
	)`)
}

// sqlGet etc. are the templates; $-parameters are listed above each.

// sqlGet: $1 id. The job with its log lines as a JSON array (NULL for none).
const sqlGet = `SELECT {{cols}}, (SELECT json_agg(json_build_object('at', l.at, 'line', l.line) ORDER BY l.seq)
	FROM {{s}}.job_logs l WHERE l.job_id = $1)
FROM {{s}}.jobs WHERE id = $1`

// sqlDelete: $1 id. Deletes a job that is not active; returns how many.
const sqlDelete = `WITH d AS (
	DELETE FROM {{s}}.jobs j WHERE j.id = $1 AND j.state <> 'active'
	RETURNING j.id, j.queue, j.unique_key, j.state AS final_state, {{notify j}} AS w
), {{keys d}}
SELECT count(*) FROM d`

// sqlClaim: $1 now, $2 queue, $3 max, $4 worker id, $5 lease expiry.
// Leases up to $3 pending jobs of one queue in claim order, skipping rows
// other claimers hold and jobs past their deadline; nothing when the queue
// is paused (one lookup per statement, not per row). The update finds
// the rows it locked by their tuple ids (ctid) in an array: a TID scan
// reads each row straight from its page, with no lookup in the primary
// key, and the rows cannot move while the lock is held (a join with c
// instead would, under a generic plan that guesses LIMIT $3 keeps a tenth
// of the queue, hash every row of the table once it has statistics).
const sqlClaim = `WITH c AS (
	SELECT ctid FROM {{s}}.jobs
	WHERE state = 'pending' AND queue = $2 AND (deadline IS NULL OR deadline > $1)
		AND NOT EXISTS (SELECT 1 FROM {{s}}.queues q WHERE q.name = $2 AND q.paused)
	ORDER BY priority DESC, run_at, id
	LIMIT $3
	FOR UPDATE SKIP LOCKED
)
UPDATE {{s}}.jobs j
SET state = 'active', attempt = j.attempt + 1, lease_token = j.lease_token + 1,
	worker_id = $4, started_at = $1, lease_expires_at = $5
WHERE j.ctid = ANY (ARRAY(SELECT ctid FROM c))
RETURNING {{cols j}}`

// sqlClaimBounded is sqlClaim within a byte budget: $6 the payload bytes
// left in the claim's budget, $7 whether earlier queues of the claim took
// jobs. It stops before the first job whose payload (octet_length, which
// reads a stored value's size without fetching it) would take the running
// sum over $6, unless it is the first job of the claim: the rows locked
// but not updated are left as they were, and freed at commit. Returns the
// claimed jobs, each row ending in whether the claim stopped for the
// budget; when it claimed none, one row of NULLs with that flag.
const sqlClaimBounded = `WITH c AS (
	SELECT ctid, priority, run_at, id, octet_length(payload) AS size FROM {{s}}.jobs
	WHERE state = 'pending' AND queue = $2 AND (deadline IS NULL OR deadline > $1)
		AND NOT EXISTS (SELECT 1 FROM {{s}}.queues q WHERE q.name = $2 AND q.paused)
	ORDER BY priority DESC, run_at, id
	LIMIT $3
	FOR UPDATE SKIP LOCKED
), b AS (
	SELECT ctid, sum(size) OVER w <= $6::bigint OR (row_number() OVER w = 1 AND NOT $7::boolean) AS fits
	FROM c
	WINDOW w AS (ORDER BY priority DESC, run_at, id ROWS UNBOUNDED PRECEDING)
), u AS (
	UPDATE {{s}}.jobs j
	SET state = 'active', attempt = j.attempt + 1, lease_token = j.lease_token + 1,
		worker_id = $4, started_at = $1, lease_expires_at = $5
	WHERE j.ctid = ANY (ARRAY(SELECT ctid FROM b WHERE fits))
	RETURNING {{cols j}}
)
SELECT u.*, x.stopped FROM (SELECT EXISTS (SELECT 1 FROM b WHERE NOT fits) AS stopped) x LEFT JOIN u ON true`

// sqlClaimTyped is sqlClaimBounded for the jobs of the types $8 alone
// (a claim without a budget passes the largest bigint as $6). It is kept
// apart so that the statements without a filter stay as they are.
var sqlClaimTyped = strings.Replace(sqlClaimBounded,
	"WHERE state = 'pending' AND queue = $2 AND", "WHERE state = 'pending' AND queue = $2 AND type = ANY ($8::text[]) AND", 1)

// sqlStep: $1 now, $2 queues (NULL for every queue), $3 limit, $4 channel.
// Promotes due scheduled and retry jobs to pending and cancels waiting jobs
// past their deadline, at most $3 in all; notifies the queues that got
// pending jobs. Returns (promoted, cancelled).
//
// Each candidate branch bounds its time from below as well (>=
// '-infinity', true of every time that is not NULL). In a generic plan
// the planner takes "x <= $1" alone to keep a third of the table, prices
// the heap fetches of an index scan by that, and (once autovacuum has
// analysed jobs) found a sequential scan cheaper than the small partial
// index jobs_deadline: about 12 ms a claim at 100,000 jobs. A two-sided
// range on one column is priced as a narrow range (0.5 %) instead, so
// both branches stay on their partial indexes (TestStepPlanUsesIndexes).
func sqlStep() string {
	eff := effRetention("t.retention_ns", "t.queue", "'cancelled'")
	return `WITH cand AS (
	SELECT id FROM {{s}}.jobs
	WHERE state IN ('scheduled', 'retry') AND run_at <= $1 AND run_at >= '-infinity'::timestamptz
		AND ($2::text[] IS NULL OR queue = ANY($2))
	UNION
	SELECT id FROM {{s}}.jobs
	WHERE deadline IS NOT NULL AND state IN ('scheduled', 'pending', 'retry')
		AND deadline <= $1 AND deadline >= '-infinity'::timestamptz
		AND ($2::text[] IS NULL OR queue = ANY($2))
), t AS (
	SELECT j.id, j.queue, j.retention_ns, (j.deadline IS NOT NULL AND j.deadline <= $1) AS expired
	FROM {{s}}.jobs j
	WHERE j.id = ANY (ARRAY(SELECT id FROM cand))
		AND ((j.state IN ('scheduled', 'retry') AND j.run_at <= $1)
			OR (j.deadline IS NOT NULL AND j.state IN ('scheduled', 'pending', 'retry') AND j.deadline <= $1))
	LIMIT $3
	FOR UPDATE SKIP LOCKED
), x AS (
	SELECT t.id, ` + eff + ` AS eff FROM t WHERE t.expired
), pr AS (
	UPDATE {{s}}.jobs j SET state = 'pending'
	FROM t WHERE j.id = t.id AND NOT t.expired
	RETURNING j.queue
), cn AS (
	UPDATE {{s}}.jobs j
	SET state = 'cancelled', cancel_reason = 'deadline', finished_at = $1, delete_at = ` + expiresAt("x.eff", "'cancelled'") + `
	FROM x WHERE j.id = x.id AND NOT ` + deleteNow("x.eff", "'cancelled'", "false") + `
	RETURNING j.id, {{notify j}} AS w
), d AS (
	DELETE FROM {{s}}.jobs j USING x
	WHERE j.id = x.id AND ` + deleteNow("x.eff", "'cancelled'", "false") + `
	RETURNING j.id, j.queue, j.unique_key, 'cancelled'::text AS final_state, {{notify j}} AS w
), {{keys d}}, n AS (
	SELECT pg_notify($4, q) FROM (SELECT DISTINCT queue AS q FROM pr) x
)
SELECT (SELECT count(*) FROM pr), (SELECT count(*) FROM cn) + (SELECT count(*) FROM d), (SELECT count(*) FROM n)`
}

// liveLeases is the CTE of the live leases among $2 ids and $3 tokens at
// $1, locked in id order (so two batches never wait on each other in a
// circle). Extra per-item columns come from the unnest in the caller.
const liveLeases = `t AS (
	SELECT j.id, j.queue, j.attempt, j.max_attempts, j.retention_ns, j.cancel_requested, i.*
	FROM {{s}}.jobs j JOIN items i ON i.item_id = j.id AND i.token = j.lease_token
	WHERE j.state = 'active' AND j.lease_expires_at > $1
	ORDER BY j.id
	FOR UPDATE OF j
)`

// countEnded is the CTEs that add the attempts of the CTE t (which has a
// queue column) to the counters of the minute $N (the placeholder
// {{minute}}), the store's and each queue's: processed for each, failed
// for each too when failed is true. The shard is the server
// process of the connection, so concurrent batches on other connections
// seldom wait for this row.
func countEnded(minute string, failed bool) string {
	f := "0"
	if failed {
		f = "count(*)"
	}
	return `c AS (
	INSERT INTO {{s}}.counters AS k (minute, shard, processed, failed)
	SELECT ` + minute + `::timestamptz, pg_backend_pid() % 8, count(*), ` + f + ` FROM t HAVING count(*) > 0
	ON CONFLICT (minute, shard) DO UPDATE
	SET processed = k.processed + excluded.processed, failed = k.failed + excluded.failed
), cq AS (
	INSERT INTO {{s}}.queue_counters AS k (queue, minute, shard, processed, failed)
	SELECT queue, ` + minute + `::timestamptz, pg_backend_pid() % 8, count(*), ` + f + ` FROM t GROUP BY queue
	ON CONFLICT (queue, minute, shard) DO UPDATE
	SET processed = k.processed + excluded.processed, failed = k.failed + excluded.failed
)`
}

// sqlHeartbeat: $1 now, $2 ids, $3 tokens, $4 new expiry. Returns the
// ids whose leases were extended, with their cancel requests.
const sqlHeartbeat = `WITH items AS (
	SELECT * FROM unnest($2::uuid[], $3::bigint[]) AS i(item_id, token)
), ` + liveLeases + `
UPDATE {{s}}.jobs j SET lease_expires_at = $4 FROM t WHERE j.id = t.id
RETURNING j.id::text, j.cancel_requested`

// sqlComplete: $1 now, $2 ids, $3 tokens, $4 results, $5 minute. Returns
// the ids completed (cancelled when a cancel was requested; deleted when
// their retention says so).
func sqlComplete() string {
	del := deleteNow("n.eff", "n.next", "coalesce(length(n.res), 0) > 0")
	return `WITH items AS (
	SELECT * FROM unnest($2::uuid[], $3::bigint[], $4::bytea[]) AS i(item_id, token, res)
), ` + liveLeases + `, n0 AS (
	SELECT t.*, CASE WHEN t.cancel_requested THEN 'cancelled' ELSE 'completed' END AS next FROM t
), n AS (
	SELECT n0.*, ` + effRetention("n0.retention_ns", "n0.queue", "n0.next") + ` AS eff FROM n0
), up AS (
	UPDATE {{s}}.jobs j
	SET state = n.next, result = n.res, finished_at = $1, lease_expires_at = NULL, worker_id = NULL,
		cancel_reason = CASE WHEN n.next = 'cancelled' THEN 'requested' ELSE j.cancel_reason END,
		delete_at = ` + expiresAt("n.eff", "n.next") + `
	FROM n WHERE j.id = n.id AND NOT ` + del + `
	RETURNING j.id, {{notify j}} AS w
), d AS (
	DELETE FROM {{s}}.jobs j USING n
	WHERE j.id = n.id AND ` + del + `
	RETURNING j.id, j.queue, j.unique_key, n.next AS final_state, {{notify j}} AS w
), {{keys d}}, ` + countEnded("$5", false) + `
SELECT id::text FROM up UNION ALL SELECT id::text FROM d`
}

// sqlCompleteLean: the parameters of sqlComplete, the ids in id order.
// The common case of a completion in one UPDATE: it completes the jobs
// whose leases are live, with no cancel requested, that their retention
// keeps (a job deleted on completion is not), notifies those watched, and
// returns their ids; Complete hands the other items to sqlComplete. It
// takes no row locks before its update and reads each row once, where
// sqlComplete locks the rows first and reads them twice: every condition
// is on the row being updated, so a row another transaction changed
// meanwhile is checked again in its new version (and left to sqlComplete
// when it no longer qualifies). The join is driven by the ids (a nested
// loop over them, or a hash join that probes with them:
// TestCompleteLeanPlan), so rows are updated in id order, the order in
// which the other batch statements lock them; were a plan ever to do
// otherwise, a deadlock sends the batch to sqlComplete. The effective
// retention is computed once per row for delete_at (OFFSET 0 keeps the
// planner from copying it into each branch of expiresAt).
func sqlCompleteLean() string {
	eff := effRetention("j.retention_ns", "j.queue", "'completed'")
	return `WITH items AS (
	SELECT * FROM unnest($2::uuid[], $3::bigint[], $4::bytea[]) AS i(item_id, token, res)
), t AS (
	UPDATE {{s}}.jobs j
	SET state = 'completed', result = i.res, finished_at = $1, lease_expires_at = NULL, worker_id = NULL,
		delete_at = (SELECT ` + expiresAt("e.eff", "'completed'") + ` FROM (SELECT ` + eff + ` AS eff OFFSET 0) e)
	FROM items i
	WHERE j.id = i.item_id AND j.lease_token = i.token AND j.state = 'active' AND j.lease_expires_at > $1
		AND NOT j.cancel_requested
		AND (coalesce(length(i.res), 0) > 0 OR ` + eff + ` <> ` + fmt.Sprint(int64(backend.RetainNone)) + `)
	RETURNING j.id, j.queue, {{notify j}} AS w
), ` + countEnded("$5", false) + `
SELECT id::text FROM t`
}

// sqlFail: $1 now, $2 ids, $3 tokens, $4 messages, $5 stacks, $6 retry
// times, $7 final flags, $8 now as JSON text, $9 channel, $10 cancel
// flags, $11 minute. Returns the ids acted on, and ” per notified queue.
func sqlFail() string {
	final := "n.next IN ('failed', 'cancelled')"
	del := "(" + final + " AND " + deleteNow("n.eff", "n.next", "false") + ")"
	return `WITH items AS (
	SELECT * FROM unnest($2::uuid[], $3::bigint[], $4::text[], $5::text[], $6::timestamptz[], $7::bool[], $10::bool[])
		AS i(item_id, token, message, stack, retry_at, final, cancel)
), ` + liveLeases + `, n0 AS (
	SELECT t.*, CASE WHEN t.cancel OR t.cancel_requested THEN 'cancelled'
		WHEN t.final OR t.attempt >= t.max_attempts THEN 'failed'
		WHEN t.retry_at > $1 THEN 'retry' ELSE 'pending' END AS next
	FROM t
), n AS (
	SELECT n0.*, ` + effRetention("n0.retention_ns", "n0.queue", "n0.next") + ` AS eff FROM n0
), up AS (
	UPDATE {{s}}.jobs j
	SET state = n.next,
		errors = coalesce(j.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
			'attempt', j.attempt, 'at', $8::text, 'kind', CASE WHEN n.cancel THEN 'cancelled' ELSE 'failed' END,
			'message', n.message, 'stack', n.stack)),
		lease_expires_at = NULL, worker_id = NULL,
		run_at = CASE n.next WHEN 'retry' THEN n.retry_at WHEN 'pending' THEN $1 ELSE j.run_at END,
		finished_at = CASE WHEN ` + final + ` THEN $1 END,
		cancel_reason = CASE WHEN n.next <> 'cancelled' THEN j.cancel_reason
			WHEN n.cancel_requested THEN 'requested' ELSE 'handler' END,
		delete_at = CASE WHEN ` + final + ` THEN ` + expiresAt("n.eff", "n.next") + ` END
	FROM n WHERE j.id = n.id AND NOT ` + del + `
	RETURNING j.id, j.queue, j.state, {{notify final j}} AS w
), d AS (
	DELETE FROM {{s}}.jobs j USING n
	WHERE j.id = n.id AND ` + del + `
	RETURNING j.id, j.queue, j.unique_key, n.next AS final_state, {{notify j}} AS w
), {{keys d}}, ` + countEnded("$11", true) + `, nq AS (
	SELECT pg_notify($9, q) FROM (SELECT DISTINCT queue AS q FROM up WHERE state = 'pending') x
)
SELECT id::text FROM up UNION ALL SELECT id::text FROM d UNION ALL SELECT '' FROM nq`
}

// sqlRelease: $1 now, $2 ids, $3 tokens, $4 now as JSON text, $5 channel.
// Returns the ids released (or cancelled, when a cancel was requested), and
// ” per notified queue.
func sqlRelease() string {
	del := "(n.next = 'cancelled' AND " + deleteNow("n.eff", "'cancelled'", "false") + ")"
	return `WITH items AS (
	SELECT * FROM unnest($2::uuid[], $3::bigint[]) AS i(item_id, token)
), ` + liveLeases + `, n AS (
	SELECT t.*, CASE WHEN t.cancel_requested THEN 'cancelled' ELSE 'pending' END AS next,
		` + effRetention("t.retention_ns", "t.queue", "'cancelled'") + ` AS eff
	FROM t
), up AS (
	UPDATE {{s}}.jobs j
	SET state = n.next, attempt = j.attempt - 1, lease_expires_at = NULL, worker_id = NULL,
		errors = coalesce(j.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
			'attempt', j.attempt, 'at', $4::text, 'kind', 'interrupted', 'message', 'released')),
		finished_at = CASE WHEN n.next = 'cancelled' THEN $1 END,
		cancel_reason = CASE WHEN n.next = 'cancelled' THEN 'requested' ELSE j.cancel_reason END,
		delete_at = CASE WHEN n.next = 'cancelled' THEN ` + expiresAt("n.eff", "'cancelled'") + ` END
	FROM n WHERE j.id = n.id AND NOT ` + del + `
	RETURNING j.id, j.queue, j.state, {{notify final j}} AS w
), d AS (
	DELETE FROM {{s}}.jobs j USING n
	WHERE j.id = n.id AND ` + del + `
	RETURNING j.id, j.queue, j.unique_key, 'cancelled'::text AS final_state, {{notify j}} AS w
), {{keys d}}, nq AS (
	SELECT pg_notify($5, q) FROM (SELECT DISTINCT queue AS q FROM up WHERE state = 'pending') x
)
SELECT id::text FROM up UNION ALL SELECT id::text FROM d UNION ALL SELECT '' FROM nq`
}

// sqlRecover: $1 now, $2 limit, $3 now as JSON text, $4 channel, $5
// minute. Ends up to $2 expired leases. Returns (recovered, failed).
func sqlRecover() string {
	final := "n.next <> 'pending'"
	del := "(" + final + " AND " + deleteNow("n.eff", "n.next", "false") + ")"
	return `WITH t AS (
	SELECT id, queue, attempt >= max_attempts AS exhausted, retention_ns, cancel_requested FROM {{s}}.jobs
	WHERE state = 'active' AND lease_expires_at <= $1
	ORDER BY lease_expires_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED
), n0 AS (
	SELECT t.*, CASE WHEN t.cancel_requested THEN 'cancelled' WHEN t.exhausted THEN 'failed' ELSE 'pending' END AS next
	FROM t
), n AS (
	SELECT n0.*, ` + effRetention("n0.retention_ns", "n0.queue", "n0.next") + ` AS eff FROM n0
), up AS (
	UPDATE {{s}}.jobs j
	SET state = n.next,
		errors = coalesce(j.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
			'attempt', j.attempt, 'at', $3::text, 'kind', 'lease_expired', 'message', 'lease expired')),
		lease_expires_at = NULL, worker_id = NULL,
		finished_at = CASE WHEN ` + final + ` THEN $1 END,
		cancel_reason = CASE WHEN n.next = 'cancelled' THEN 'requested' ELSE j.cancel_reason END,
		delete_at = CASE WHEN ` + final + ` THEN ` + expiresAt("n.eff", "n.next") + ` END
	FROM n WHERE j.id = n.id AND NOT ` + del + `
	RETURNING j.queue, j.state, {{notify final j}} AS w
), d AS (
	DELETE FROM {{s}}.jobs j USING n
	WHERE j.id = n.id AND ` + del + `
	RETURNING j.id, j.queue, j.unique_key, n.next AS final_state, {{notify j}} AS w
), {{keys d}}, ` + countEnded("$5", true) + `, nq AS (
	SELECT pg_notify($4, q) FROM (SELECT DISTINCT queue AS q FROM up WHERE state = 'pending') x
)
SELECT (SELECT count(*) FROM up) + (SELECT count(*) FROM d),
	(SELECT count(*) FROM up WHERE state = 'failed') + (SELECT count(*) FROM d WHERE final_state = 'failed'),
	(SELECT count(*) FROM nq)`
}

// sqlRetention: $1 now, $2 limit. Deletes up to $2 final jobs whose
// retention has run out; returns how many. (Rows are found by id in an
// array, as in sqlClaim, so that no plan hashes the whole table.)
const sqlRetention = `WITH t AS (
	SELECT id FROM {{s}}.jobs WHERE delete_at <= $1
	ORDER BY delete_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED
), d AS (
	DELETE FROM {{s}}.jobs j WHERE j.id = ANY (ARRAY(SELECT id FROM t))
	RETURNING j.id, j.queue, j.unique_key, j.state AS final_state, {{notify j}} AS w
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

// sqlInsert: $1.. $17 one array per column, $18 created at, $19 channel.
// Writes new jobs and notifies the queues that got pending ones, once the
// transaction commits.
const sqlInsert = `WITH ins AS (
	INSERT INTO {{s}}.jobs (id, queue, type, payload, title, priority, state, max_attempts, run_at,
		timeout_ns, deadline, unique_key, unique_for_ns, tags, metadata, retention_ns, jid, created_at)
	SELECT i.*, $18::timestamptz FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bytea[], $5::text[],
		$6::smallint[], $7::text[], $8::int[], $9::timestamptz[], $10::bigint[], $11::timestamptz[],
		$12::text[], $13::bigint[], $14::jsonb[], $15::jsonb[], $16::bigint[], $17::text[]) AS i
	RETURNING queue, state
)
SELECT count(*) FROM (SELECT pg_notify($19, q) FROM (SELECT DISTINCT queue AS q FROM ins WHERE state = 'pending') x) y`

// sqlInsertQuiet: sqlInsert without the notifications ($19 is unused and
// absent), for Enqueue, which hands them to the store's notifier after the
// commit instead. (A transaction that notifies holds a server-wide lock
// from before its commit record is flushed until it is done, so notifying
// commits cannot share a flush: at thousands of enqueues per second that
// lock, not the disk, sets the pace.)
const sqlInsertQuiet = `INSERT INTO {{s}}.jobs (id, queue, type, payload, title, priority, state, max_attempts, run_at,
	timeout_ns, deadline, unique_key, unique_for_ns, tags, metadata, retention_ns, jid, created_at)
SELECT i.*, $18::timestamptz FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bytea[], $5::text[],
	$6::smallint[], $7::text[], $8::int[], $9::timestamptz[], $10::bigint[], $11::timestamptz[],
	$12::text[], $13::bigint[], $14::jsonb[], $15::jsonb[], $16::bigint[], $17::text[]) AS i`

// sqlInsertOne: sqlInsertQuiet for one job, with one parameter per
// column: arrays of one cost more to build and take apart than the row.
const sqlInsertOne = `INSERT INTO {{s}}.jobs (id, queue, type, payload, title, priority, state, max_attempts, run_at,
	timeout_ns, deadline, unique_key, unique_for_ns, tags, metadata, retention_ns, jid, created_at)
VALUES ($1::uuid, $2, $3, $4, $5, $6::smallint, $7, $8::int, $9, $10::bigint, $11, $12, $13::bigint, $14::jsonb, $15::jsonb, $16::bigint, $17, $18)`

// sqlInsertClaimed: sqlInsertOne ($1.. $18) for a job that a claim
// waiting on its queue may take in the same statement (fillclaim.go): $19
// the claim's now, $20 its worker id, $21 its lease expiry, $22 its
// queues (with one, its queue alone, a text: that form looks the queue up
// without unnest's nested loop, about 15 us of the server's 110 for the
// statement). The job goes in active and leased, as sqlClaim leaves a
// job it takes, when a claim now would take it: it is pending, past no
// deadline, its queue is not paused, and the claim's queues hold no other
// job a claim could take (pending, past no deadline, not locked by
// another claimer; one found is locked until the commit, as a claim's
// are). Each queue is looked up on its own, in jobs_claim's order, as
// sqlClaim does: the generic plan of one lookup for the jobs of any queue
// in $22 scans the table once the planner thinks pending jobs common
// (TestInsertClaimedPlan). Otherwise it goes in as sqlInsertOne writes
// it. The row is written once, instead of inserted pending and then
// locked and updated by sqlClaim. Returns one row: whether the job went
// in active. Not the job's row: the caller has every value the statement
// wrote, and builds the claimed job from them (claimedOnInsert), which
// spares the server sending the row and the caller decoding it.
func sqlInsertClaimed(one bool) string {
	other := `SELECT 1 FROM unnest($22::text[]) AS cq(name), LATERAL (
			SELECT 1 FROM {{s}}.jobs WHERE state = 'pending' AND queue = cq.name
				AND (deadline IS NULL OR deadline > $19::timestamptz)
			ORDER BY priority DESC, run_at, id
			LIMIT 1
			FOR UPDATE SKIP LOCKED) o`
	if one {
		other = `SELECT 1 FROM {{s}}.jobs WHERE state = 'pending' AND queue = $22::text
				AND (deadline IS NULL OR deadline > $19::timestamptz)
			ORDER BY priority DESC, run_at, id
			LIMIT 1
			FOR UPDATE SKIP LOCKED`
	}
	return `WITH c AS (
	SELECT $7::text = 'pending' AND ($11::timestamptz IS NULL OR $11::timestamptz > $19::timestamptz)
		AND NOT EXISTS (SELECT 1 FROM {{s}}.queues q WHERE q.name = $2::text AND q.paused)
		AND NOT EXISTS (` + other + `) AS claimed
)
INSERT INTO {{s}}.jobs AS j (id, queue, type, payload, title, priority, state, max_attempts, run_at,
	timeout_ns, deadline, unique_key, unique_for_ns, tags, metadata, retention_ns, jid, created_at,
	attempt, lease_token, worker_id, started_at, lease_expires_at)
SELECT $1::uuid, $2::text, $3::text, $4::bytea, $5::text, $6::smallint,
	CASE WHEN c.claimed THEN 'active' ELSE $7::text END, $8::int, $9::timestamptz, $10::bigint,
	$11::timestamptz, $12::text, $13::bigint, $14::jsonb, $15::jsonb, $16::bigint, $17::text, $18::timestamptz,
	CASE WHEN c.claimed THEN 1 ELSE 0 END, CASE WHEN c.claimed THEN 1 ELSE 0 END,
	CASE WHEN c.claimed THEN $20::text END, CASE WHEN c.claimed THEN $19::timestamptz END,
	CASE WHEN c.claimed THEN $21::timestamptz END
FROM c
RETURNING j.state = 'active'`
}

// sqlTakeKeys: $1 item indexes, $2 queues, $3 keys, $4 job ids, $5 held
// until (NULL while the job lives), $6 now. Takes each free key for its
// job, in the order given; returns, per item, the holder when the key was
// held (NULLs when taken).
const sqlTakeKeys = `SELECT i.idx, h.holder::text, h.holder_state
FROM unnest($1::int[], $2::text[], $3::text[], $4::uuid[], $5::timestamptz[]) AS i(idx, q, k, id, until),
	LATERAL {{s}}.take_unique_key(i.q, i.k, i.id, i.until, $6) h`

// sqlInsertAt: sqlInsertQuiet with one creation time per job: $1.. $17
// one array per column, $18 the creation times. For the coalesced
// enqueues of several callers, each with its own clock.
const sqlInsertAt = `INSERT INTO {{s}}.jobs (id, queue, type, payload, title, priority, state, max_attempts, run_at,
	timeout_ns, deadline, unique_key, unique_for_ns, tags, metadata, retention_ns, jid, created_at)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bytea[], $5::text[],
	$6::smallint[], $7::text[], $8::int[], $9::timestamptz[], $10::bigint[], $11::timestamptz[],
	$12::text[], $13::bigint[], $14::jsonb[], $15::jsonb[], $16::bigint[], $17::text[], $18::timestamptz[]) AS i`

// sqlTakeKeysAt: sqlTakeKeys with one clock per item: $1 item indexes,
// $2 queues, $3 keys, $4 job ids, $5 held until, $6 now, all arrays.
const sqlTakeKeysAt = `SELECT i.idx, h.holder::text, h.holder_state
FROM unnest($1::int[], $2::text[], $3::text[], $4::uuid[], $5::timestamptz[], $6::timestamptz[]) AS i(idx, q, k, id, until, now),
	LATERAL {{s}}.take_unique_key(i.q, i.k, i.id, i.until, i.now) h`

// sqlFinishWaiting: $1 now, $2 id, $3 expires at. Cancels a waiting job at
// a caller's request (the caller holds its row and decided its expiry).
const sqlFinishWaiting = `UPDATE {{s}}.jobs
SET state = 'cancelled', cancel_reason = 'requested', finished_at = $1, delete_at = $3
WHERE id = $2
RETURNING {{cols}}`

// sqlRetry: $1 ids, $2 now. Sends failed and cancelled jobs back to
// pending as backend.RetryParams says (unique keys are the caller's).
const sqlRetry = `UPDATE {{s}}.jobs
SET state = 'pending', run_at = $2, max_attempts = greatest(max_attempts, attempt + 1),
	finished_at = NULL, delete_at = NULL, result = NULL, cancel_reason = NULL, cancel_requested = false,
	deadline = CASE WHEN deadline <= $2 THEN NULL ELSE deadline END
WHERE id = ANY($1::uuid[]) AND state IN ('failed', 'cancelled')
RETURNING {{cols}}`

// sqlRetryCandidates: $1 queue, $2 the id to start after, $3 limit; the
// state is {{state}}. The oldest jobs of a queue in a state, locked.
const sqlRetryCandidates = `SELECT j.id::text, coalesce(j.unique_key, ''), j.unique_for_ns FROM {{s}}.jobs j
WHERE j.queue = $1 AND j.state = {{state}} AND j.id > $2::uuid
ORDER BY j.id
LIMIT $3
FOR UPDATE SKIP LOCKED`

// sqlPurge: $1 queue, $2 limit; the state is {{state}}. Deletes the
// oldest $2 jobs of a queue in a state (never an active one); returns how
// many.
const sqlPurge = `WITH t AS (
	SELECT id FROM {{s}}.jobs WHERE queue = $1 AND state = {{state}}
	ORDER BY id
	LIMIT $2
	FOR UPDATE SKIP LOCKED
), d AS (
	DELETE FROM {{s}}.jobs j WHERE j.id = ANY (ARRAY(SELECT id FROM t)) AND j.state = {{state}} AND j.state <> 'active'
	RETURNING j.id, j.queue, j.unique_key, j.state AS final_state, {{notify j}} AS w
), {{keys d}}
SELECT count(*) FROM d`

// sqlUpdateQueue: $1 queue, $2 paused (NULL: keep), $3..$5 retention
// overrides for completed, failed, cancelled (NULL: keep). Returns the
// settings and whether the queue was paused before.
const sqlUpdateQueue = `WITH old AS (
	SELECT paused FROM {{s}}.queues WHERE name = $1
), up AS (
	INSERT INTO {{s}}.queues AS q (name, paused, retain_completed, retain_failed, retain_cancelled)
	VALUES ($1, coalesce($2::boolean, false), coalesce($3::bigint, 0), coalesce($4::bigint, 0), coalesce($5::bigint, 0))
	ON CONFLICT (name) DO UPDATE SET paused = coalesce($2::boolean, q.paused),
		retain_completed = coalesce($3::bigint, q.retain_completed),
		retain_failed = coalesce($4::bigint, q.retain_failed),
		retain_cancelled = coalesce($5::bigint, q.retain_cancelled)
	RETURNING q.paused, q.retain_completed, q.retain_failed, q.retain_cancelled
)
SELECT up.*, coalesce((SELECT paused FROM old), false) FROM up`

// sqlReport: $1 now, $2 ids, $3 tokens, $4 progress (JSON text, NULL to keep),
// $5 lines per item, $6 the cap, $7..$9 one row per line: job id, its
// index within its item, text. Records progress and the lines under the
// cap for each live lease; returns the ids acted on.
const sqlReport = `WITH items AS (
	SELECT * FROM unnest($2::uuid[], $3::bigint[], $4::text[], $5::int[]) AS i(item_id, token, prog, n)
), t AS (
	SELECT j.id, j.log_count, i.prog, i.n, greatest(0, least(i.n, $6::int - j.log_count)) AS kept
	FROM {{s}}.jobs j JOIN items i ON i.item_id = j.id AND i.token = j.lease_token
	WHERE j.state = 'active' AND j.lease_expires_at > $1
	ORDER BY j.id
	FOR UPDATE OF j
), up AS (
	UPDATE {{s}}.jobs j
	SET progress = coalesce(t.prog::jsonb, j.progress), log_count = j.log_count + t.kept,
		logs_dropped = j.logs_dropped + (t.n - t.kept)
	FROM t WHERE j.id = t.id
	RETURNING j.id
), ins AS (
	INSERT INTO {{s}}.job_logs (job_id, seq, at, line)
	SELECT l.job_id, t.log_count + l.ord, $1, l.line
	FROM unnest($7::uuid[], $8::int[], $9::text[]) AS l(job_id, ord, line) JOIN t ON t.id = l.job_id
	WHERE l.ord < t.kept
)
SELECT id::text FROM up`

// sqlStatsCounts counts the jobs per queue and state, with the earliest
// run-at of each queue's pending jobs, in one statement (one snapshot).
// Each branch reads the partial index of its states (index-only where the
// index holds the queue), never the whole table.
const sqlStatsCounts = `SELECT queue, 'completed', count(*), NULL::timestamptz FROM {{s}}.jobs WHERE state = 'completed' GROUP BY queue
UNION ALL
SELECT queue, 'failed', count(*), NULL FROM {{s}}.jobs WHERE state = 'failed' GROUP BY queue
UNION ALL
SELECT queue, 'cancelled', count(*), NULL FROM {{s}}.jobs WHERE state = 'cancelled' GROUP BY queue
UNION ALL
SELECT queue, 'pending', count(*), min(run_at) FROM {{s}}.jobs WHERE state = 'pending' GROUP BY queue
UNION ALL
SELECT queue, 'active', count(*), NULL FROM {{s}}.jobs WHERE state = 'active' GROUP BY queue
UNION ALL
SELECT queue, state, count(*), NULL FROM {{s}}.jobs WHERE state IN ('scheduled', 'retry') GROUP BY queue, state`

// sqlFoldMinutes: $1 the first minute kept. Adds the counters of older
// minutes to the totals row (minute '-infinity') and deletes them.
const sqlFoldMinutes = `WITH old AS (
	DELETE FROM {{s}}.counters WHERE minute < $1 AND minute > '-infinity'
	RETURNING processed, failed
)
INSERT INTO {{s}}.counters AS k (minute, shard, processed, failed)
SELECT '-infinity', 0, sum(processed), sum(failed) FROM old HAVING count(*) > 0
ON CONFLICT (minute, shard) DO UPDATE
SET processed = k.processed + excluded.processed, failed = k.failed + excluded.failed`
