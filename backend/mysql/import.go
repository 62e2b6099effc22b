package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/kyuhq/kyu/backend"
)

// Import writes jobs with their history (see backend.Importer) in one
// transaction, run again after a deadlock or a concurrent insert of the
// same id, JID or key: it finds the ids that exist, reads the holders of
// the new jobs' JIDs (a job whose JID another job holds, or an earlier
// job of the batch, is a conflict), takes the unique keys of the others
// in (queue, key) order, as Enqueue does, then writes the rows, their log
// lines and the counts of the final ones. A job whose id
// exists is compared afterwards, as Get reads it.
func (s *store) Import(ctx context.Context, p backend.ImportParams) (backend.ImportResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.ImportResult{}, err
	}
	defer s.end()
	res := backend.ImportResult{Items: make([]backend.ImportItem, len(p.Jobs))}
	if len(p.Jobs) == 0 {
		return res, nil
	}
	var existing []int
	var pending []string
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		existing, pending, err = s.importIn(ctx, tx, p, res.Items)
		return err
	})
	if err != nil {
		return backend.ImportResult{}, s.wrap("import", err)
	}
	s.signals.wake(pending)
	for _, i := range existing {
		j := p.Jobs[i]
		old, err := s.get(ctx, j.ID)
		if err != nil {
			return backend.ImportResult{}, s.wrap("import", err)
		}
		if f := backend.SameJob(old, j); f != "" {
			res.Items[i] = backend.ImportItem{Outcome: backend.ImportConflict, Reason: backend.ImportDiffers(j.ID, f)}
		} else {
			res.Items[i] = backend.ImportItem{Outcome: backend.ImportSame}
		}
	}
	return res, nil
}

// importIn writes the jobs of p whose id is free in tx and sets their
// items; it returns the positions of the jobs whose id exists and the
// queues that got pending jobs. It starts from nothing each time, as inTx
// may run it again.
func (s *store) importIn(ctx context.Context, tx *sql.Tx, p backend.ImportParams, items []backend.ImportItem) (existing []int, pending []string, err error) {
	clear(items)
	found, err := s.existingIDs(ctx, tx, p.Jobs)
	if err != nil {
		return nil, nil, err
	}
	var fresh []*backend.Job
	for _, j := range p.Jobs {
		if !found[j.ID] {
			fresh = append(fresh, j)
		}
	}
	var held map[string]jidHolder
	if jids := planJIDs(fresh); len(jids) > 0 {
		if held, err = s.jidHolders(ctx, tx, jids); err != nil {
			return nil, nil, err
		}
	}
	var keyed []int
	for i, j := range p.Jobs {
		if found[j.ID] {
			existing = append(existing, i)
			continue
		}
		if h, ok := held[j.JID]; ok && j.JID != "" {
			items[i] = backend.ImportItem{Outcome: backend.ImportConflict, HolderID: h.id,
				Reason: backend.ImportJIDHeld(j.ID, j.JID, h.id)}
			continue
		}
		if j.JID != "" {
			// A later job of the batch with this JID conflicts with this one.
			held[j.JID] = jidHolder{id: j.ID, state: j.State}
		}
		if backend.HoldsKey(j, p.Now) {
			keyed = append(keyed, i)
		}
	}
	// Keys in one order, as Enqueue takes them, so that two imports
	// cannot wait on each other's keys; the earlier job of the batch
	// takes a key first.
	slices.SortStableFunc(keyed, func(a, b int) int {
		ja, jb := p.Jobs[a], p.Jobs[b]
		return cmp.Or(cmp.Compare(ja.Queue, jb.Queue), cmp.Compare(ja.UniqueKey, jb.UniqueKey))
	})
	taken := map[[2]string]string{}
	for _, i := range keyed {
		j := p.Jobs[i]
		k := [2]string{j.Queue, j.UniqueKey}
		holder, ok := taken[k]
		if !ok {
			var until any
			if j.UniqueFor > 0 {
				until = micros(j.CreatedAt.Add(j.UniqueFor))
			}
			if holder, _, err = s.takeKeyUntil(ctx, tx, j, p.Now, until); err != nil {
				return nil, nil, err
			}
		}
		if holder != "" {
			items[i] = backend.ImportItem{Outcome: backend.ImportConflict, HolderID: holder,
				Reason: backend.ImportKeyHeld(j.ID, j.Queue, j.UniqueKey, holder)}
			continue
		}
		taken[k] = j.ID
	}
	var jobs []*backend.Job
	var lines []any
	finals := map[[2]string]int64{}
	for i, j := range p.Jobs {
		if found[j.ID] || items[i].Outcome == backend.ImportConflict {
			continue
		}
		items[i] = backend.ImportItem{Outcome: backend.ImportCreated}
		jobs = append(jobs, j)
		for n, l := range j.Logs {
			lines = append(lines, j.ID, n, micros(l.At), l.Line)
		}
		switch {
		case j.State.Final():
			finals[[2]string{j.Queue, string(j.State)}]++
		case j.State == backend.StatePending && !slices.Contains(pending, j.Queue):
			pending = append(pending, j.Queue)
		}
	}
	if err := s.insertImported(ctx, tx, jobs); err != nil {
		return nil, nil, err
	}
	for ls := lines; len(ls) > 0; {
		n := min(len(ls), 4*flushChunk)
		if _, err := tx.ExecContext(ctx, s.insertLines(n/4), ls[:n]...); err != nil {
			return nil, nil, err
		}
		ls = ls[n:]
	}
	if err := s.countImportedFinal(ctx, tx, finals); err != nil {
		return nil, nil, err
	}
	return existing, pending, nil
}

// existingIDs returns which of jobs' ids the store holds.
func (s *store) existingIDs(ctx context.Context, tx *sql.Tx, jobs []*backend.Job) (map[string]bool, error) {
	ids := make([]any, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	rows, err := tx.QueryContext(ctx, `SELECT id FROM `+s.table("jobs")+` WHERE id IN `+placeholders(len(ids)), ids...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	found := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		found[id] = true
	}
	return found, rows.Err()
}

// insertImported writes whole job records, history included, in the
// order of jobColumns.
func (s *store) insertImported(ctx context.Context, tx *sql.Tx, jobs []*backend.Job) error {
	ph := placeholders(len(jobColumns))
	for len(jobs) > 0 {
		n := min(len(jobs), insertChunk)
		chunk := jobs[:n]
		jobs = jobs[n:]
		args := make([]any, 0, n*len(jobColumns))
		vals := make([]string, 0, n)
		for _, j := range chunk {
			var err error
			if args, err = importArgs(args, j); err != nil {
				return err
			}
			vals = append(vals, ph)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(s.sqls.insertJob, strings.Join(vals, ", ")), args...); err != nil {
			return err
		}
	}
	return nil
}

// importArgs appends the values of jobColumns for an imported job, as
// it is.
func importArgs(args []any, j *backend.Job) ([]any, error) {
	encode := func(field string, v any, empty bool) (any, error) {
		t, err := jsonText(v, empty)
		if err != nil {
			return nil, fmt.Errorf("encode %s of %s: %w", field, j.ID, err)
		}
		return t, nil
	}
	tags, err := encode("tags", j.Tags, len(j.Tags) == 0)
	if err != nil {
		return nil, err
	}
	meta, err := encode("metadata", j.Metadata, len(j.Metadata) == 0)
	if err != nil {
		return nil, err
	}
	errs, err := encode("errors", j.Errors, len(j.Errors) == 0)
	if err != nil {
		return nil, err
	}
	prog, err := encode("progress", j.Progress, j.Progress == nil)
	if err != nil {
		return nil, err
	}
	var key any
	if j.UniqueKey != "" {
		key = []byte(j.UniqueKey)
	}
	payload := j.Payload
	if payload == nil {
		payload = []byte{}
	}
	return append(args, j.ID, j.Queue, string(j.State), j.Priority, micros(j.RunAt), j.Type, j.Title, j.Attempt, j.MaxAttempts,
		j.LeaseToken, int64(j.Timeout), nullMicros(j.Deadline), key, int64(j.UniqueFor), int64(j.Retention), micros(j.CreatedAt),
		nullMicros(j.StartedAt), nullMicros(j.FinishedAt), nullMicros(j.ExpiresAt), nullMicros(j.LeaseExpiresAt),
		nullString(j.WorkerID), nullString(j.CancelReason), j.CancelRequested, tags, meta, errs, prog,
		j.LogsDropped, len(j.Logs), payload, j.Result, nullBytes(j.JID)), nil
}

// countImportedFinal adds imported final jobs to the counts of final
// jobs per queue and state, in one order of rows.
func (s *store) countImportedFinal(ctx context.Context, tx *sql.Tx, finals map[[2]string]int64) error {
	if len(finals) == 0 {
		return nil
	}
	keys := make([][2]string, 0, len(finals))
	for k := range finals {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	shard := rand.IntN(8)
	args := make([]any, 0, 4*len(keys))
	vals := make([]string, 0, len(keys))
	for _, k := range keys {
		args = append(args, k[0], k[1], shard, finals[k])
		vals = append(vals, "(?, ?, ?, ?)")
	}
	_, err := tx.ExecContext(ctx, fmt.Sprintf(s.sqls.countFinal, strings.Join(vals, ", ")), args...)
	return err
}
