package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// enqueuePlan is one Enqueue's jobs as records, before they are written.
type enqueuePlan struct {
	now  time.Time
	jobs []*backend.Job
	// res is the outcome per job; dup marks the duplicates found.
	res []backend.EnqueuedJob
}

func newEnqueuePlan(p backend.EnqueueParams) (*enqueuePlan, error) {
	pl := &enqueuePlan{now: p.Now, jobs: make([]*backend.Job, len(p.Jobs)), res: make([]backend.EnqueuedJob, len(p.Jobs))}
	for i := range p.Jobs {
		id, err := backend.NewID()
		if err != nil {
			return nil, err
		}
		pl.jobs[i] = p.Jobs[i].Record(id, p.Now)
	}
	return pl, nil
}

// Enqueue writes new jobs atomically, in one transaction, taking their
// unique keys first.
func (s *store) Enqueue(ctx context.Context, p backend.EnqueueParams) (backend.EnqueueResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.EnqueueResult{}, err
	}
	defer s.end()
	pl, err := newEnqueuePlan(p)
	if err != nil {
		return backend.EnqueueResult{}, err
	}
	switch {
	case coalescable(pl):
		for i, j := range pl.jobs {
			pl.res[i] = backend.EnqueuedJob{ID: j.ID, State: j.State}
		}
		err = s.coalesced(ctx, pl.jobs)
	case plain(pl.jobs):
		// One INSERT statement is atomic on its own: no transaction to
		// begin and commit around it.
		err = s.retrying(ctx, func() error { return s.enqueueIn(ctx, s.db, pl) })
	default:
		err = s.inTx(ctx, func(tx *sql.Tx) error { return s.enqueueIn(ctx, tx, pl) })
	}
	if err != nil {
		return backend.EnqueueResult{}, s.wrap("enqueue", err)
	}
	s.signals.wake(pl.pendingQueues())
	return backend.EnqueueResult{Jobs: pl.res}, nil
}

// plain reports whether jobs go into the store in one INSERT statement
// and nothing else: no unique key to take, no JID to check, and few
// enough for one.
func plain(jobs []*backend.Job) bool {
	if len(jobs) > insertChunk {
		return false
	}
	for _, j := range jobs {
		if j.UniqueKey != "" || j.JID != "" {
			return false
		}
	}
	return true
}

// pendingQueues lists the queues that got pending jobs.
func (pl *enqueuePlan) pendingQueues() []string {
	var qs []string
	for i, j := range pl.jobs {
		if !pl.res[i].Duplicate && j.State == backend.StatePending && !containsString(qs, j.Queue) {
			qs = append(qs, j.Queue)
		}
	}
	return qs
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// enqueueIn checks the JIDs, takes the unique keys and inserts the jobs in
// q (a transaction of the store's, or the caller's), one job after
// another as if alone: a job whose JID is held, by a stored job or an
// earlier job of the batch, is a duplicate of its holder and takes no
// key. It may run again after a rollback, so it sets every outcome
// afresh.
func (s *store) enqueueIn(ctx context.Context, q queryer, pl *enqueuePlan) error {
	var held map[string]jidHolder
	if jids := planJIDs(pl.jobs); len(jids) > 0 {
		var err error
		if held, err = s.jidHolders(ctx, q, jids); err != nil {
			return err
		}
	}
	taken := map[[2]string]int{}
	for i, j := range pl.jobs {
		pl.res[i] = backend.EnqueuedJob{ID: j.ID, State: j.State}
		if h, ok := held[j.JID]; ok && j.JID != "" {
			pl.res[i] = backend.EnqueuedJob{ID: h.id, State: h.state, Duplicate: true}
			continue
		}
		if j.UniqueKey != "" {
			k := [2]string{j.Queue, j.UniqueKey}
			if first, ok := taken[k]; ok {
				pl.res[i] = backend.EnqueuedJob{ID: pl.jobs[first].ID, State: pl.jobs[first].State, Duplicate: true}
				continue
			}
			holder, state, err := s.takeKey(ctx, q, j, pl.now)
			if err != nil {
				return err
			}
			if holder != "" {
				pl.res[i] = backend.EnqueuedJob{ID: holder, State: state, Duplicate: true}
				continue
			}
			taken[k] = i
		}
		if j.JID != "" {
			// Later jobs of the batch with this JID are its duplicates.
			held[j.JID] = jidHolder{id: j.ID, state: j.State}
		}
	}
	var batch []*backend.Job
	for i, j := range pl.jobs {
		if !pl.res[i].Duplicate {
			batch = append(batch, j)
		}
	}
	return s.insertJobs(ctx, q, batch)
}

// insertChunk bounds the jobs of one INSERT statement.
const insertChunk = 500

// insertJobs writes job records.
func (s *store) insertJobs(ctx context.Context, q queryer, jobs []*backend.Job) error {
	for len(jobs) > 0 {
		n := min(len(jobs), insertChunk)
		chunk := jobs[:n]
		jobs = jobs[n:]
		args := make([]any, 0, len(chunk)*len(newJobColumns))
		vals := make([]string, 0, len(chunk))
		ph := placeholders(len(newJobColumns))
		for _, j := range chunk {
			var err error
			if args, err = insertArgs(args, j); err != nil {
				return err
			}
			vals = append(vals, ph)
		}
		if _, err := q.ExecContext(ctx, fmt.Sprintf(s.sqls.insertNew, strings.Join(vals, ", ")), args...); err != nil {
			return err
		}
	}
	return nil
}

// insertArgs appends the values of newJobColumns for a new job.
func insertArgs(args []any, j *backend.Job) ([]any, error) {
	tags, err := jsonText(j.Tags, len(j.Tags) == 0)
	if err != nil {
		return nil, fmt.Errorf("encode tags: %w", err)
	}
	meta, err := jsonText(j.Metadata, len(j.Metadata) == 0)
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	var key any
	if j.UniqueKey != "" {
		key = []byte(j.UniqueKey)
	}
	payload := j.Payload
	if payload == nil {
		payload = []byte{}
	}
	return append(args, j.ID, j.Queue, string(j.State), j.Priority, micros(j.RunAt), j.Type, j.Title, j.MaxAttempts,
		int64(j.Timeout), nullMicros(j.Deadline), key, int64(j.UniqueFor), int64(j.Retention), micros(j.CreatedAt),
		tags, meta, payload, nullBytes(j.JID)), nil
}

// takeKey gives j's unique key to j unless another job holds it at now;
// then it returns that holder's id and state and changes nothing. The
// key's row stays locked until the transaction ends, so no one else takes
// it meanwhile.
func (s *store) takeKey(ctx context.Context, q queryer, j *backend.Job, now time.Time) (holder string, state backend.State, err error) {
	var until any
	if j.UniqueFor > 0 {
		until = micros(now.Add(j.UniqueFor))
	}
	return s.takeKeyUntil(ctx, q, j, now, until)
}

// takeKeyUntil is takeKey with the end of j's period given: until is
// Unix microseconds, or nil for a key held while j is not final.
func (s *store) takeKeyUntil(ctx context.Context, q queryer, j *backend.Job, now time.Time, until any) (holder string, state backend.State, err error) {
	key := []byte(j.UniqueKey)
	rows, err := q.QueryContext(ctx, s.sqls.keyLock, j.Queue, key)
	if err != nil {
		return "", "", err
	}
	var id string
	var heldUntil sql.NullInt64
	var jobState sql.NullString
	found := rows.Next()
	if found {
		err = rows.Scan(&id, &heldUntil, &jobState)
	}
	rows.Close()
	if err == nil {
		err = rows.Err()
	}
	if err != nil {
		return "", "", err
	}
	if !found {
		// A concurrent insert of the same key makes this fail with a
		// duplicate key (1062) once it commits; the transaction runs again.
		_, err := q.ExecContext(ctx, s.sqls.keyInsert, j.Queue, key, j.ID, until)
		return "", "", err
	}
	var current sql.NullString
	srows, err := q.QueryContext(ctx, s.sqls.holderState, id)
	if err != nil {
		return "", "", err
	}
	if srows.Next() {
		err = srows.Scan(&current)
	}
	srows.Close()
	if err != nil {
		return "", "", err
	}
	st := backend.State(current.String)
	held := heldUntil.Valid && micros(now) < heldUntil.Int64 ||
		!heldUntil.Valid && current.Valid && !st.Final()
	if held {
		if !current.Valid {
			st = backend.State(jobState.String)
		}
		return id, st, nil
	}
	_, err = q.ExecContext(ctx, s.sqls.keyTake, j.ID, until, j.Queue, key)
	return "", "", err
}
