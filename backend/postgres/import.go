package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kyuhq/kyu/backend"
)

// sqlImport writes whole jobs, one array per column, skipping ids that
// exist; it returns the ids it wrote.
const sqlImport = `INSERT INTO {{s}}.jobs (id, type, queue, payload, title, priority, state, attempt, max_attempts,
	run_at, timeout_ns, deadline, unique_key, unique_for_ns, tags, metadata, retention_ns, created_at,
	started_at, finished_at, worker_id, lease_token, lease_expires_at, errors, result, cancel_reason,
	cancel_requested, progress, log_count, logs_dropped, delete_at, jid)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bytea[], $5::text[], $6::smallint[], $7::text[],
	$8::int[], $9::int[], $10::timestamptz[], $11::bigint[], $12::timestamptz[], $13::text[], $14::bigint[],
	$15::jsonb[], $16::jsonb[], $17::bigint[], $18::timestamptz[], $19::timestamptz[], $20::timestamptz[],
	$21::text[], $22::bigint[], $23::timestamptz[], $24::jsonb[], $25::bytea[], $26::text[], $27::bool[],
	$28::jsonb[], $29::int[], $30::int[], $31::timestamptz[], $32::text[])
ON CONFLICT (id) DO NOTHING
RETURNING id::text`

// sqlImportLogs writes the log lines of imported jobs.
const sqlImportLogs = `INSERT INTO {{s}}.job_logs (job_id, seq, at, line)
SELECT * FROM unnest($1::uuid[], $2::int[], $3::timestamptz[], $4::text[])`

// Import writes jobs with their history (see backend.Importer) in one
// transaction: the JIDs are locked and their holders read first (a job
// whose JID another job holds, or an earlier job of the batch, is not
// written), then the new rows, then their unique keys (so a second job of
// the batch with the same key sees the first as its holder), then the log
// lines; a job whose key is held is taken out again before the commit. A
// job whose id exists is compared afterwards, as Get reads it.
func (s *store) Import(ctx context.Context, p backend.ImportParams) (backend.ImportResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.ImportResult{}, err
	}
	res := backend.ImportResult{Items: make([]backend.ImportItem, len(p.Jobs))}
	copied, pending, err := s.importByCopy(ctx, p, res.Items)
	var existing []int
	if err == nil && !copied {
		existing, pending, err = s.importNew(ctx, p, res.Items)
	}
	s.end()
	if err != nil {
		return backend.ImportResult{}, s.wrap("import", err)
	}
	s.notifyPending(pending)
	for _, i := range existing {
		j := p.Jobs[i]
		old, err := s.Get(ctx, backend.GetParams{ID: j.ID})
		if err != nil {
			return backend.ImportResult{}, err
		}
		if f := backend.SameJob(old, j); f != "" {
			res.Items[i] = backend.ImportItem{Outcome: backend.ImportConflict, Reason: backend.ImportDiffers(j.ID, f)}
		} else {
			res.Items[i] = backend.ImportItem{Outcome: backend.ImportSame}
		}
	}
	return res, nil
}

// importNew writes the jobs whose id is free and fills their items; it
// returns the positions of the jobs whose id exists, and the queues of
// the pending jobs it wrote.
func (s *store) importNew(ctx context.Context, p backend.ImportParams, items []backend.ImportItem) (existing []int, pending []string, err error) {
	if len(p.Jobs) == 0 {
		return nil, nil, nil
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after a commit it does nothing
	r := pgxRunner{tx}
	jidHeld, err := s.importJIDs(ctx, r, p.Jobs)
	if err != nil {
		return nil, nil, err
	}
	jobs := p.Jobs
	if len(jidHeld) > 0 {
		jobs = nil
		for i, j := range p.Jobs {
			if _, ok := jidHeld[i]; !ok {
				jobs = append(jobs, j)
			}
		}
	}
	cols, err := importColumns(jobs)
	if err != nil {
		return nil, nil, err
	}
	written := map[string]bool{}
	err = r.run(ctx, fill(sqlImport, s.schema, ""), cols, func(scan func(...any) error) error {
		var id string
		if err := scan(&id); err != nil {
			return err
		}
		written[id] = true
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var keyed []int
	for i, j := range p.Jobs {
		if holder, ok := jidHeld[i]; ok {
			if holder == "" { // its id exists: compared afterwards
				existing = append(existing, i)
				continue
			}
			items[i] = backend.ImportItem{Outcome: backend.ImportConflict, HolderID: holder,
				Reason: backend.ImportJIDHeld(j.ID, j.JID, holder)}
			continue
		}
		switch {
		case !written[j.ID]:
			existing = append(existing, i)
		case backend.HoldsKey(j, p.Now):
			keyed = append(keyed, i)
		}
	}
	// Keys in one order, as Enqueue takes them, so that two imports
	// cannot wait on each other's keys.
	slices.SortStableFunc(keyed, func(a, b int) int {
		ja, jb := p.Jobs[a], p.Jobs[b]
		return cmp.Or(cmp.Compare(ja.Queue, jb.Queue), cmp.Compare(ja.UniqueKey, jb.UniqueKey))
	})
	if len(keyed) > 0 {
		n := len(keyed)
		idx := make([]int32, n)
		queues, keys, ids := make([]string, n), make([]string, n), make([]string, n)
		until := make([]pgtype.Timestamptz, n)
		for k, i := range keyed {
			j := p.Jobs[i]
			idx[k], queues[k], keys[k], ids[k] = int32(i), j.Queue, j.UniqueKey, j.ID
			if j.UniqueFor > 0 {
				until[k] = pgtype.Timestamptz{Time: j.CreatedAt.Add(j.UniqueFor), Valid: true}
			}
		}
		var refused []string
		now := pgtype.Timestamptz{Time: p.Now, Valid: true}
		err := r.run(ctx, s.sqls.takeKeys, []any{idx, queues, keys, ids, until, now}, func(scan func(...any) error) error {
			var i int32
			var holder, state pgtype.Text
			if err := scan(&i, &holder, &state); err != nil {
				return err
			}
			if i < 0 || int(i) >= len(items) {
				return fmt.Errorf("unique keys: item %d out of range", i)
			}
			if holder.Valid {
				j := p.Jobs[i]
				items[i] = backend.ImportItem{Outcome: backend.ImportConflict, HolderID: holder.String,
					Reason: backend.ImportKeyHeld(j.ID, j.Queue, j.UniqueKey, holder.String)}
				refused = append(refused, j.ID)
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		if len(refused) > 0 {
			err := r.run(ctx, fill(`DELETE FROM {{s}}.jobs WHERE id = ANY($1::uuid[])`, s.schema, ""), []any{refused}, func(func(...any) error) error { return nil })
			if err != nil {
				return nil, nil, err
			}
		}
	}
	var logIDs, lines []string
	var seqs []int32
	var ats []pgtype.Timestamptz
	for i, j := range p.Jobs {
		if _, ok := jidHeld[i]; ok || !written[j.ID] || items[i].Outcome == backend.ImportConflict {
			continue
		}
		items[i] = backend.ImportItem{Outcome: backend.ImportCreated}
		if j.State == backend.StatePending && !slices.Contains(pending, j.Queue) {
			pending = append(pending, j.Queue)
		}
		for n, l := range j.Logs {
			logIDs, seqs, lines = append(logIDs, j.ID), append(seqs, int32(n)), append(lines, l.Line)
			ats = append(ats, pgtype.Timestamptz{Time: l.At, Valid: true})
		}
	}
	if len(logIDs) > 0 {
		err := r.run(ctx, fill(sqlImportLogs, s.schema, ""), []any{logIDs, seqs, ats, lines}, func(func(...any) error) error { return nil })
		if err != nil {
			return nil, nil, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, nil, err
	}
	return existing, pending, nil
}

// importJIDs locks the JIDs of jobs in the transaction r and returns the
// jobs (by position) not to write for their JID, each with the id of the
// job that holds it: one of the store's, or an earlier job of the batch.
// A job whose own id exists is mapped to "" instead: it is compared with
// the stored job, as any job whose id exists. A job that holds its own
// JID already (imported before) is not among them.
func (s *store) importJIDs(ctx context.Context, r pgxRunner, jobs []*backend.Job) (map[int]string, error) {
	var jids []string
	for _, j := range jobs {
		if j.JID != "" {
			jids = append(jids, j.JID)
		}
	}
	if len(jids) == 0 {
		return nil, nil
	}
	held, err := s.lockJIDs(ctx, r, jids)
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	var ids []string
	first := map[string]string{}
	for i, j := range jobs {
		if j.JID == "" {
			continue
		}
		holder := held[j.JID].id
		if holder == "" {
			holder = first[j.JID]
		}
		if holder == "" || holder == j.ID {
			first[j.JID] = j.ID
			continue
		}
		out[i] = holder
		ids = append(ids, j.ID)
	}
	if len(ids) == 0 {
		return out, nil
	}
	found := map[string]bool{}
	err = r.run(ctx, s.sqls.existing, []any{ids}, func(scan func(...any) error) error {
		var id string
		if err := scan(&id); err != nil {
			return err
		}
		found[id] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		if found[jobs[i].ID] {
			out[i] = ""
		}
	}
	return out, nil
}

// importColumns turns jobs into sqlImport's arrays.
func importColumns(jobs []*backend.Job) ([]any, error) {
	n := len(jobs)
	var (
		ids, types, queues, titles, states = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		keys, workers, reasons, jids       = make([]pgtype.Text, n), make([]pgtype.Text, n), make([]pgtype.Text, n), make([]pgtype.Text, n)
		payloads, results                  = make([][]byte, n), make([][]byte, n)
		tags, metadata, errs, progress     = make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
		priorities                         = make([]int16, n)
		attempts, maxAttempts, logCounts   = make([]int32, n), make([]int32, n), make([]int32, n)
		dropped                            = make([]int32, n)
		timeouts, uniqueFors, retentions   = make([]int64, n), make([]int64, n), make([]int64, n)
		tokens                             = make([]int64, n)
		runAts, deadlines, created         = make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
		started, finished, leases, expires = make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
		requested                          = make([]bool, n)
	)
	asJSON := func(v any, empty bool) ([]byte, error) {
		if empty {
			return nil, nil
		}
		return json.Marshal(v)
	}
	for k, j := range jobs {
		ids[k], types[k], queues[k], titles[k], states[k] = j.ID, j.Type, j.Queue, j.Title, string(j.State)
		keys[k], workers[k], reasons[k], jids[k] = nullText(j.UniqueKey), nullText(j.WorkerID), nullText(j.CancelReason), nullText(j.JID)
		payloads[k], results[k] = j.Payload, j.Result
		if payloads[k] == nil {
			payloads[k] = []byte{}
		}
		var err error
		if tags[k], err = asJSON(j.Tags, len(j.Tags) == 0); err == nil {
			if metadata[k], err = asJSON(j.Metadata, len(j.Metadata) == 0); err == nil {
				if errs[k], err = asJSON(j.Errors, len(j.Errors) == 0); err == nil {
					progress[k], err = asJSON(j.Progress, j.Progress == nil)
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, err)
		}
		priorities[k] = int16(j.Priority)
		attempts[k], maxAttempts[k], logCounts[k], dropped[k] = int32(j.Attempt), int32(j.MaxAttempts), int32(len(j.Logs)), int32(j.LogsDropped)
		timeouts[k], uniqueFors[k], retentions[k], tokens[k] = int64(j.Timeout), int64(j.UniqueFor), int64(j.Retention), j.LeaseToken
		runAts[k], deadlines[k], created[k] = nullTime(j.RunAt), nullTime(j.Deadline), nullTime(j.CreatedAt)
		started[k], finished[k], leases[k], expires[k] = nullTime(j.StartedAt), nullTime(j.FinishedAt), nullTime(j.LeaseExpiresAt), nullTime(j.ExpiresAt)
		requested[k] = j.CancelRequested
	}
	return []any{ids, types, queues, payloads, titles, priorities, states, attempts, maxAttempts,
		runAts, timeouts, deadlines, keys, uniqueFors, tags, metadata, retentions, created,
		started, finished, workers, tokens, leases, errs, results, reasons,
		requested, progress, logCounts, dropped, expires, jids}, nil
}
