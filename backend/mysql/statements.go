package mysql

import (
	"fmt"
	"strings"

	"github.com/kyuhq/kyu/backend"
)

// statements holds the SQL of the store's frequent operations with its
// table prefix filled in; {{p}} in a template is the prefix. The
// parameters of each are listed above its template.
type statements struct {
	lockRows, lockRowsPayload string
	lockRowsRetention         string
	claim, claimTyped         string
	markClaimed               string
	completePlain             string
	completeLean              string
	countFinal, countLean     string
	extend                    string
	save, saveResult          string
	insertJob, insertNew      string
	count, countQueue         string
	countQueueLean            string
	get, getLogs              string
	getJID, jidHolders        string
	keyLock, keyInsert        string
	keyTake, holderState      string
	keyFree, keyKeep          string
	deleteJobs, deleteLogs    string
	queueSettings             string
	bump, versions            string
}

func newStatements(prefix string) *statements {
	f := func(tmpl string) string { return strings.ReplaceAll(tmpl, "{{p}}", prefix) }
	insertCols := strings.Join(jobColumns, ", ")
	var upd []string
	for _, c := range mutableColumns {
		if c != "result" {
			upd = append(upd, c+" = VALUES("+c+")")
		}
	}
	save := `INSERT INTO {{p}}jobs (id, queue, priority, type, title, timeout_ns, created_at, payload, ` +
		strings.Join(mutableColumns, ", ") + `) VALUES %s ON DUPLICATE KEY UPDATE ` + strings.Join(upd, ", ")
	return &statements{
		// %s: the ids' placeholders.
		lockRows: f(`SELECT ` + selectCols(false) + ` FROM {{p}}jobs j WHERE j.id IN %s ORDER BY j.id FOR UPDATE`),
		// lockRows with each row's queue's retention overrides (NULL
		// when the queue has none), read by subqueries that lock nothing.
		lockRowsRetention: f(`SELECT ` + selectCols(false) + `,
			(SELECT q.retain_completed FROM {{p}}queues q WHERE q.name = j.queue),
			(SELECT q.retain_failed FROM {{p}}queues q WHERE q.name = j.queue),
			(SELECT q.retain_cancelled FROM {{p}}queues q WHERE q.name = j.queue)
			FROM {{p}}jobs j WHERE j.id IN %s ORDER BY j.id FOR UPDATE`),
		lockRowsPayload: f(`SELECT ` + selectCols(true) + ` FROM {{p}}jobs j WHERE j.id IN %s ORDER BY j.id FOR UPDATE`),
		// queue, queue, limit: a queue's pending jobs in claim order,
		// skipping rows other transactions hold; none when the queue is
		// paused (the subquery takes no lock).
		claim: f(`SELECT ` + selectCols(true) + ` FROM {{p}}jobs j FORCE INDEX (jobs_claim)
			WHERE j.state = 'pending' AND j.queue = ? AND NOT EXISTS (SELECT 1 FROM {{p}}queues q WHERE q.name = ? AND q.paused)
			ORDER BY j.neg_priority, j.run_at, j.id LIMIT ? FOR UPDATE SKIP LOCKED`),
		// queue, queue, %s types, limit.
		claimTyped: f(`SELECT ` + selectCols(true) + ` FROM {{p}}jobs j FORCE INDEX (jobs_claim)
			WHERE j.state = 'pending' AND j.queue = ? AND NOT EXISTS (SELECT 1 FROM {{p}}queues q WHERE q.name = ? AND q.paused)
			AND j.type IN %s ORDER BY j.neg_priority, j.run_at, j.id LIMIT ? FOR UPDATE SKIP LOCKED`),
		// worker, started, lease expiry, %s ids.
		markClaimed: f(`UPDATE {{p}}jobs SET state = 'active', attempt = attempt + 1, lease_token = lease_token + 1,
			worker_id = ?, started_at = ?, lease_expires_at = ? WHERE id IN %s`),
		// finished at, expires at, %s ids: completes jobs with no result
		// whose row the transaction holds and found live.
		completePlain: f(`UPDATE {{p}}jobs SET state = 'completed', finished_at = ?, expires_at = ?,
			lease_expires_at = NULL, worker_id = NULL, result = NULL WHERE id IN %s`),
		// now ×5, %s ids, now, %s (WHEN id THEN token)s, then the
		// arguments of %s (a check of the rows' queues, or nothing):
		// completes the jobs whose leases are live, with no cancel
		// requested and a retention that keeps them, setting their
		// expiry as backend.Expiry does. The rows are found by their
		// primary key only: the other conditions would tempt the
		// optimizer into a range over every active job's lease.
		completeLean: f(completeLean()),
		// %s rows (queue, state, shard, delta).
		countFinal: f(`INSERT INTO {{p}}final_counts (queue, state, shard, n) VALUES %s
			ON DUPLICATE KEY UPDATE n = n + VALUES(n)`),
		// shard, %s ids: counts the jobs a lean completion completed.
		countLean: f(`INSERT INTO {{p}}final_counts (queue, state, shard, n)
			SELECT queue, 'completed', ?, count(*) FROM {{p}}jobs WHERE id IN %s GROUP BY queue
			ON DUPLICATE KEY UPDATE n = n + VALUES(n)`),
		// lease expiry, %s ids.
		extend: f(`UPDATE {{p}}jobs SET lease_expires_at = ? WHERE id IN %s`),
		// %s rows of saveArgs: writes back the mutable columns of locked
		// rows (the insert never happens: the rows exist and are held).
		save:       f(save),
		saveResult: f(save + `, result = VALUES(result)`),
		// %s rows of importArgs.
		insertJob: f(`INSERT INTO {{p}}jobs (` + insertCols + `) VALUES %s`),
		// %s rows of insertArgs.
		insertNew: f(`INSERT INTO {{p}}jobs (` + strings.Join(newJobColumns, ", ") + `) VALUES %s`),
		// %s rows (minute, shard, processed, failed).
		count: f(`INSERT INTO {{p}}counters (minute, shard, processed, failed) VALUES %s
			ON DUPLICATE KEY UPDATE processed = processed + VALUES(processed), failed = failed + VALUES(failed)`),
		// %s rows (queue, minute, shard, processed, failed).
		countQueue: f(`INSERT INTO {{p}}queue_counters (queue, minute, shard, processed, failed) VALUES %s
			ON DUPLICATE KEY UPDATE processed = processed + VALUES(processed), failed = failed + VALUES(failed)`),
		// minute, shard, %s ids: counts the attempts a lean completion
		// ended, per queue.
		countQueueLean: f(`INSERT INTO {{p}}queue_counters (queue, minute, shard, processed, failed)
			SELECT queue, ?, ?, count(*), 0 FROM {{p}}jobs WHERE id IN %s GROUP BY queue ORDER BY queue
			ON DUPLICATE KEY UPDATE processed = processed + VALUES(processed)`),
		get:     f(`SELECT ` + selectCols(true) + ` FROM {{p}}jobs j WHERE j.id = ?`),
		getLogs: f(`SELECT at, line FROM {{p}}job_logs WHERE job_id = ? ORDER BY seq`),
		// jid.
		getJID: f(`SELECT ` + selectCols(true) + ` FROM {{p}}jobs j WHERE j.jid = ?`),
		// %s jids: the jobs that hold them (a plain read: see jid.go).
		jidHolders: f(`SELECT jid, id, state FROM {{p}}jobs WHERE jid IN %s`),
		// queue, key.
		keyLock: f(`SELECT job_id, held_until, job_state FROM {{p}}unique_keys WHERE queue = ? AND ukey = ? FOR UPDATE`),
		// queue, key, job id, held until.
		keyInsert: f(`INSERT INTO {{p}}unique_keys (queue, ukey, job_id, held_until) VALUES (?, ?, ?, ?)`),
		// job id, held until, queue, key.
		keyTake:     f(`UPDATE {{p}}unique_keys SET job_id = ?, held_until = ?, job_state = NULL WHERE queue = ? AND ukey = ?`),
		holderState: f(`SELECT state FROM {{p}}jobs WHERE id = ?`),
		// queue, key, job id: a deleted job's key held while it lived is
		// forgotten; one held for a period remembers the job's last state.
		keyFree:       f(`DELETE FROM {{p}}unique_keys WHERE queue = ? AND ukey = ? AND job_id = ? AND held_until IS NULL`),
		keyKeep:       f(`UPDATE {{p}}unique_keys SET job_state = ? WHERE queue = ? AND ukey = ? AND job_id = ? AND held_until IS NOT NULL`),
		deleteJobs:    f(`DELETE FROM {{p}}jobs WHERE id IN %s`),
		deleteLogs:    f(`DELETE FROM {{p}}job_logs WHERE job_id IN %s`),
		queueSettings: f(`SELECT name, paused, retain_completed, retain_failed, retain_cancelled FROM {{p}}queues WHERE name IN %s`),
		// %s rows (queue, shard).
		bump:     f(`INSERT INTO {{p}}signals (queue, shard, version) VALUES %s ON DUPLICATE KEY UPDATE version = version + 1`),
		versions: f(`SELECT queue, sum(version) FROM {{p}}signals GROUP BY queue`),
	}
}

// completeLean builds the statement of Store.leanComplete: backend.Expiry
// for a completed job without a result, in SQL.
func completeLean() string {
	eff := `IF(retention_ns <> 0, retention_ns, COALESCE((SELECT q.retain_completed FROM {{p}}queues q WHERE q.name = {{p}}jobs.queue), 0))`
	keep, _ := backend.RetainDefault.Keep(backend.StateCompleted)
	maxMicros := backend.MaxTime().UnixMicro()
	at := func(plus string) string {
		return fmt.Sprintf(`IF(? + %s >= %d, NULL, ? + %s)`, plus, maxMicros, plus)
	}
	expires := fmt.Sprintf(`CASE WHEN %[1]s = %[2]d THEN NULL WHEN %[1]s > 0 THEN %[3]s ELSE %[4]s END`,
		eff, int64(backend.RetainForever), at("("+eff+") DIV 1000"), at(fmt.Sprint(keep.Microseconds())))
	return `UPDATE {{p}}jobs FORCE INDEX (PRIMARY) SET state = 'completed', finished_at = ?, expires_at = ` + expires + `,
		lease_expires_at = NULL, worker_id = NULL, result = NULL
		WHERE id IN %s AND state = 'active' AND lease_expires_at > ? AND NOT cancel_requested
		AND lease_token = CASE id %s END AND ` + eff + ` <> ` + fmt.Sprint(int64(backend.RetainNone)) + `%s`
}
