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

// Enqueue writes p.Jobs atomically. Jobs without a unique key go in with
// one INSERT (a binary COPY from copyMinJobs new jobs on); unique keys are
// taken first, in one statement, inside the same transaction. Queues that
// got pending jobs are notified on commit.
//
// Calls of up to lineMaxJobs jobs that come while lineCalls others are on
// their way are coalesced: they wait, and go together in one transaction
// (see enqueueLined).
func (s *store) Enqueue(ctx context.Context, p backend.EnqueueParams) (backend.EnqueueResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.EnqueueResult{}, err
	}
	defer s.end()
	plan, err := newEnqueuePlan(p)
	if err != nil {
		return backend.EnqueueResult{}, err
	}
	if len(plan.jobs) <= lineMaxJobs {
		return s.enqueueLined(ctx, plan)
	}
	return s.enqueueAlone(ctx, plan)
}

// enqueueAlone writes one call's plan in a transaction of its own, which
// also fills the claims waiting for its jobs (fillclaim.go), and notifies
// the queues that got pending jobs.
func (s *store) enqueueAlone(ctx context.Context, plan *enqueuePlan) (backend.EnqueueResult, error) {
	if ws := s.takeWaiting([]*enqueuePlan{plan}); ws != nil {
		if filled, done, err := s.enqueueFilling(ctx, "enqueue", []*enqueuePlan{plan}, ws); done {
			if err != nil {
				return backend.EnqueueResult{}, err
			}
			s.notifyPending(plan.pendingQueues(filled))
			return plan.result(), nil
		}
	}
	if len(plan.keyed) == 0 && !plan.hasJID {
		// One statement: its own transaction.
		if err := s.insert(ctx, pgxRunner{s.pool}, plan, false); err != nil {
			return backend.EnqueueResult{}, s.wrap("enqueue", err)
		}
	} else {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return backend.EnqueueResult{}, s.wrap("enqueue", err)
		}
		err = s.enqueueIn(ctx, pgxRunner{tx}, plan, false)
		if err == nil {
			err = tx.Commit(ctx)
		}
		if err != nil {
			tx.Rollback(ctx) //nolint:errcheck // the first error is the one to report
			return backend.EnqueueResult{}, s.wrap("enqueue", err)
		}
	}
	s.notifyPending(plan.pendingQueues(nil))
	return plan.result(), nil
}

// notifyPending wakes the subscribers of queues, here at once and in other
// processes through the notifier.
func (s *store) notifyPending(queues []string) {
	for _, q := range queues {
		s.listen.signal(q)
	}
	s.notifier.notify(queues)
}

// enqueueIn checks the plan's JIDs, takes its unique keys and writes its
// new jobs within one transaction, r; with notify, the INSERT also
// notifies on commit.
func (s *store) enqueueIn(ctx context.Context, r runner, plan *enqueuePlan, notify bool) error {
	if err := s.takeJIDs(ctx, r, []*enqueuePlan{plan}); err != nil {
		return err
	}
	if err := s.takeKeys(ctx, r, plan); err != nil {
		return err
	}
	return s.insert(ctx, r, plan, notify)
}

// enqueuePlan is one Enqueue worked out before it reaches the database.
type enqueuePlan struct {
	now  pgtype.Timestamptz
	jobs []*backend.Job // one record per item, with its new id
	res  []backend.EnqueuedJob
	// keyed lists the items that take a unique key in the database: the
	// first item of the batch with each (queue, key), sorted by queue and
	// key so that concurrent batches take keys in one order.
	keyed []int
	// sameKey maps a later item with an earlier item's key to that item.
	sameKey map[int]int
	// hasJID: an item has a JID, so the plan is written in a transaction
	// that checks the JIDs first (takeJIDs).
	hasJID bool
	// sameJID maps a later item with the JID of an earlier item, of this
	// plan or of an earlier plan of its coalesced group, to that item.
	sameJID map[int]jidRef
}

// newEnqueuePlan makes the records of a prepared EnqueueParams.
func newEnqueuePlan(p backend.EnqueueParams) (*enqueuePlan, error) {
	plan := &enqueuePlan{
		now:  pgtype.Timestamptz{Time: p.Now, Valid: true},
		jobs: make([]*backend.Job, len(p.Jobs)),
		res:  make([]backend.EnqueuedJob, len(p.Jobs)),
	}
	for i := range p.Jobs {
		nj := &p.Jobs[i]
		id, err := backend.NewID()
		if err != nil {
			return nil, err
		}
		j := nj.Record(id, p.Now)
		plan.jobs[i] = j
		plan.res[i] = backend.EnqueuedJob{ID: id, State: j.State}
		plan.hasJID = plan.hasJID || j.JID != ""
	}
	plan.indexKeys()
	return plan, nil
}

// indexKeys works out keyed and sameKey over the items that are not
// duplicates already (of a JID).
func (plan *enqueuePlan) indexKeys() {
	plan.keyed, plan.sameKey = plan.keyed[:0], map[int]int{}
	first := map[[2]string]int{}
	for i, j := range plan.jobs {
		if j.UniqueKey == "" || plan.res[i].Duplicate {
			continue
		}
		k := [2]string{j.Queue, j.UniqueKey}
		if f, ok := first[k]; ok {
			plan.sameKey[i] = f
			continue
		}
		first[k] = i
		plan.keyed = append(plan.keyed, i)
	}
	slices.SortFunc(plan.keyed, func(a, b int) int {
		ja, jb := plan.jobs[a], plan.jobs[b]
		return cmp.Or(cmp.Compare(ja.Queue, jb.Queue), cmp.Compare(ja.UniqueKey, jb.UniqueKey))
	})
}

// settle makes every later item with an earlier item's key a duplicate of
// whatever holds that key now, and then every later item with an earlier
// item's JID a duplicate of whatever that item came to (its own new job,
// or the holder of its key). The plans before this one in its group are
// settled already.
func (plan *enqueuePlan) settle() {
	for i, f := range plan.sameKey {
		r := plan.res[f]
		plan.res[i] = backend.EnqueuedJob{ID: r.ID, State: r.State, Duplicate: true}
	}
	for i, f := range plan.sameJID {
		r := f.plan.res[f.i]
		plan.res[i] = backend.EnqueuedJob{ID: r.ID, State: r.State, Duplicate: true}
	}
}

// fresh lists the items to write.
func (plan *enqueuePlan) fresh() []int {
	out := make([]int, 0, len(plan.jobs))
	for i, r := range plan.res {
		if !r.Duplicate {
			out = append(out, i)
		}
	}
	return out
}

// pendingQueues lists the queues that got a pending job, leaving out the
// jobs of filled, those a waiting claim took in the enqueue's commit.
func (plan *enqueuePlan) pendingQueues(filled map[string]bool) []string {
	var qs []string
	for i, r := range plan.res {
		if !r.Duplicate && r.State == backend.StatePending && !filled[r.ID] && !slices.Contains(qs, plan.jobs[i].Queue) {
			qs = append(qs, plan.jobs[i].Queue)
		}
	}
	return qs
}

// result is the EnqueueResult of the plan once it is written.
func (plan *enqueuePlan) result() backend.EnqueueResult {
	return backend.EnqueueResult{Jobs: plan.res}
}

// takeKeys takes the unique keys of plan.keyed in one statement, marking
// the items whose key was held as duplicates.
func (s *store) takeKeys(ctx context.Context, r runner, plan *enqueuePlan) error {
	n := len(plan.keyed)
	if n == 0 {
		plan.settle()
		return nil
	}
	idx := make([]int32, n)
	queues, keys, ids := make([]string, n), make([]string, n), make([]string, n)
	until := make([]pgtype.Timestamptz, n)
	for k, i := range plan.keyed {
		j := plan.jobs[i]
		idx[k], queues[k], keys[k], ids[k] = int32(i), j.Queue, j.UniqueKey, j.ID
		if j.UniqueFor > 0 {
			until[k] = pgtype.Timestamptz{Time: j.CreatedAt.Add(j.UniqueFor), Valid: true}
		}
	}
	err := r.run(ctx, s.sqls.takeKeys, []any{idx, queues, keys, ids, until, plan.now}, func(scan func(...any) error) error {
		var i int32
		var holder, state pgtype.Text
		if err := scan(&i, &holder, &state); err != nil {
			return err
		}
		if i < 0 || int(i) >= len(plan.res) {
			return fmt.Errorf("unique keys: item %d out of range", i)
		}
		if holder.Valid {
			plan.res[i] = backend.EnqueuedJob{ID: holder.String, State: backend.State(state.String), Duplicate: true}
		}
		return nil
	})
	if err != nil {
		return err
	}
	plan.settle()
	return nil
}

// insert writes the plan's fresh jobs with one INSERT which, with notify,
// also notifies the queues that got pending jobs when its transaction
// commits; without notify, and on a pgx runner, it writes copyMinJobs or
// more with COPY instead.
func (s *store) insert(ctx context.Context, r runner, plan *enqueuePlan, notify bool) error {
	fresh := plan.fresh()
	n := len(fresh)
	if n == 0 {
		return nil
	}
	rows := make([][]any, n)
	for k, i := range fresh {
		row, err := insertRow(plan.jobs[i])
		if err != nil {
			return fmt.Errorf("job %d: %w", i, err)
		}
		rows[k] = row
	}
	if pr, ok := canCopy(r); ok && !notify && n >= copyMinJobs {
		return s.copyJobs(ctx, pr, rows, plan.now.Time)
	}
	query, args := s.sqls.insertQuiet, []any(nil)
	if n == 1 && !notify {
		query, args = s.sqls.insertOne, rows[0]
	} else {
		args = columns(rows)
	}
	args = append(args, plan.now) // $18
	if notify {
		query, args = s.sqls.insert, append(args, s.channel) // $19
	}
	return r.run(ctx, query, args, func(scan func(...any) error) error { return nil })
}

// insertRow is one job's values for the insert statements, in their order
// ($1 to $17; $18, the creation time, is shared).
func insertRow(j *backend.Job) ([]any, error) {
	payload := j.Payload
	if payload == nil {
		payload = []byte{}
	}
	var tags, metadata []byte
	if len(j.Tags) > 0 {
		b, err := json.Marshal(j.Tags)
		if err != nil {
			return nil, fmt.Errorf("tags: %w", err)
		}
		tags = b
	}
	if len(j.Metadata) > 0 {
		b, err := json.Marshal(j.Metadata)
		if err != nil {
			return nil, fmt.Errorf("metadata: %w", err)
		}
		metadata = b
	}
	return []any{
		j.ID, j.Queue, j.Type, payload, j.Title, int16(j.Priority), string(j.State), int32(j.MaxAttempts),
		pgtype.Timestamptz{Time: j.RunAt, Valid: true}, int64(j.Timeout), nullTime(j.Deadline), nullText(j.UniqueKey),
		int64(j.UniqueFor), tags, metadata, int64(j.Retention), nullText(j.JID),
	}, nil
}

// columns turns rows of insertRow into one typed slice per column, for the
// unnest of the batch insert statements.
func columns(rows [][]any) []any {
	n := len(rows)
	var (
		ids, queues, types, titles, states = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		keys, jids                         = make([]pgtype.Text, n), make([]pgtype.Text, n)
		payloads, tags, metadata           = make([][]byte, n), make([][]byte, n), make([][]byte, n)
		priorities                         = make([]int16, n)
		maxAttempts                        = make([]int32, n)
		runAts, deadlines                  = make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
		timeouts, uniqueFors, retentions   = make([]int64, n), make([]int64, n), make([]int64, n)
	)
	for k, r := range rows {
		ids[k], queues[k], types[k], payloads[k], titles[k] = r[0].(string), r[1].(string), r[2].(string), r[3].([]byte), r[4].(string)
		priorities[k], states[k], maxAttempts[k], runAts[k] = r[5].(int16), r[6].(string), r[7].(int32), r[8].(pgtype.Timestamptz)
		timeouts[k], deadlines[k], keys[k], uniqueFors[k] = r[9].(int64), r[10].(pgtype.Timestamptz), r[11].(pgtype.Text), r[12].(int64)
		tags[k], metadata[k], retentions[k], jids[k] = r[13].([]byte), r[14].([]byte), r[15].(int64), r[16].(pgtype.Text)
	}
	return []any{ids, queues, types, payloads, titles, priorities, states, maxAttempts, runAts,
		timeouts, deadlines, keys, uniqueFors, tags, metadata, retentions, jids}
}
