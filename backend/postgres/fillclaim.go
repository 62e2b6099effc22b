package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kyuhq/kyu/backend"
)

// Filling waiting claims in an enqueue's transaction. An idle worker's
// claim waits in the store (waitclaim.go); an Enqueue of this process that
// makes jobs of its queues pending takes it and claims for it in its own
// transaction, with the insert or after it. The job is then
// enqueued and claimed with one commit, one WAL flush, instead of the
// enqueue's and then the claim's, and the claim takes what a Claim would
// (priority, run-at, the other processes' jobs, paused queues, deadlines,
// types, budget), perhaps another job than the new one.
//
// An idle worker's case, one new job and one claim of its queue (and
// perhaps others), is one statement (sqlInsertClaimed): it inserts the
// job active, leased to the claim, when a claim would take it (its queue
// is not paused and the claim's queues hold no other job to claim), and
// pending otherwise, the claim then claiming again itself. The job's row is written once,
// not inserted pending and then locked and updated. When the enqueue is
// one INSERT and each claim it fills reads one queue (the common case
// otherwise), the statements go in one pipeline whose implicit
// transaction commits at its end: one round trip, as the enqueue alone.
// Otherwise (unique keys, JIDs, a COPY, claims of several queues) they go
// in a transaction: the enqueue's statements, then each claim queue by
// queue, as Claim makes them.
//
// Callers in a user's transaction (EnqueueTx) fill no claim: their jobs are
// not visible until that transaction commits, and its commit is theirs.

// takeWaiting takes the waiting claims that plans, once written, may
// fill: nil when none waits on a queue they make pending jobs in. With no
// claim waiting it reads one atomic and looks at no job.
func (s *store) takeWaiting(plans []*enqueuePlan) []*waitingClaim {
	if s.waiting.n.Load() == 0 {
		return nil
	}
	var queues []string
	jobs := 0
	for _, p := range plans {
		for i, j := range p.jobs {
			if p.res[i].Duplicate || j.State != backend.StatePending {
				continue
			}
			jobs++
			if !slices.Contains(queues, j.Queue) {
				queues = append(queues, j.Queue)
			}
		}
	}
	if jobs == 0 {
		return nil
	}
	return s.waiting.take(queues, jobs)
}

// enqueueFilling writes plans (one call's, or a coalesced group's) in one
// transaction with the claims of ws, answers ws, and returns the ids of
// the jobs the claims took (their queues need no wake-up for them) and the
// enqueue's error, wrapped with op. When the transaction was rolled back
// for a claim's error, it answers ws with nothing and returns done false:
// the caller writes plans without them, so an enqueue never fails for a
// claim.
func (s *store) enqueueFilling(ctx context.Context, op string, plans []*enqueuePlan, ws []*waitingClaim) (filled map[string]bool, done bool, err error) {
	fills := make([]claimFill, len(ws))
	defer func() {
		for i, w := range ws {
			for _, j := range fills[i].res.Jobs {
				if filled == nil {
					filled = make(map[string]bool)
				}
				filled[j.ID] = true
			}
			w.filled <- fills[i]
		}
	}()
	ps := make([]backend.ClaimParams, len(ws))
	orders := make([][]string, len(ws))
	single := true
	for i, w := range ws {
		ps[i] = w.params()
		orders[i] = claimOrder(ps[i])
		single = single && len(orders[i]) == 1
	}
	for _, p := range plans {
		single = single && len(p.keyed) == 0 && !p.hasJID
	}
	if len(ws) == 1 && len(plans) == 1 && claimsOnInsert(plans[0], ps[0], orders[0]) {
		done, err = s.fillInsert(ctx, op, plans[0], ps[0], orders[0], &fills[0])
		return nil, done, err
	}
	if len(plans) == 1 && len(plans[0].jobs) >= copyMinJobs {
		// Written with COPY, which cannot join a pipeline.
		single = false
	}
	write := func(r runner) error {
		if len(plans) == 1 {
			return s.enqueueIn(ctx, r, plans[0], false)
		}
		return s.enqueueGroupIn(ctx, r, plans)
	}
	if single {
		done, err = s.fillPipelined(ctx, op, write, ps, orders, fills)
	} else {
		done, err = s.fillInTx(ctx, op, write, ps, orders, fills)
	}
	return nil, done, err
}

// claimsOnInsert says whether the claim p, of the queues order, may take
// plan's job in the job's own insert (sqlInsertClaimed): the plan is one
// new pending job, written with one INSERT, in a queue of the claim, and
// the claim takes jobs of any type. (Neither the order of the queues nor
// a byte budget matters to a claim that finds that job alone: the first
// job of a claim always fits its budget.)
func claimsOnInsert(plan *enqueuePlan, p backend.ClaimParams, order []string) bool {
	if len(plan.jobs) != 1 || len(plan.keyed) > 0 || plan.hasJID || plan.res[0].Duplicate {
		return false
	}
	j := plan.jobs[0]
	return j.State == backend.StatePending && slices.Contains(order, j.Queue) && len(p.Types) == 0
}

// fillInsert writes plan's one job with sqlInsertClaimed, which gives it
// to the claim p, of the queues order, when a claim now would take it,
// and sets fill from what that claimed (see enqueueFilling). When those
// queues hold other jobs to claim, or the job's is paused, the job goes
// in pending and fill stays empty: the claim claims again itself, and
// takes what Claim would.
func (s *store) fillInsert(ctx context.Context, op string, plan *enqueuePlan, p backend.ClaimParams, order []string, fill *claimFill) (bool, error) {
	row, err := insertRow(plan.jobs[0])
	if err != nil {
		return true, s.wrap(op, fmt.Errorf("job 0: %w", err))
	}
	expires := p.Now.Add(p.Lease)
	query, args := s.sqls.insertClaimed, append(row, plan.now, p.Now, nullText(p.WorkerID), expires, order)
	if len(order) == 1 {
		query, args[len(args)-1] = s.sqls.insertClaimedOne, order[0]
	}
	var claimed bool
	if err := s.pool.QueryRow(ctx, query, args...).Scan(&claimed); err != nil {
		if serverError(err) {
			return false, nil // rolled back: the enqueue goes alone
		}
		return true, s.wrap(op, err)
	}
	if claimed {
		s.vacuum.note(1)
		fill.res = backend.ClaimResult{Jobs: []*backend.Job{claimedOnInsert(plan.jobs[0], p.WorkerID, p.Now, expires)}}
	}
	return true, nil
}

// claimedOnInsert is the job j as sqlInsertClaimed wrote it when it went
// in active, leased to worker at now until expires: what reading its row
// back gives (TestClaimedOnInsertMatchesRow), built from the values the
// statement was given. Times are cut to the microsecond, as timestamptz
// keeps them, and in UTC, as scanJob gives them; the JSON columns and the
// payload come back as they go in (an empty list or map is stored as
// NULL, an absent payload as empty).
func claimedOnInsert(j *backend.Job, worker string, now, expires time.Time) *backend.Job {
	c := *j
	stored := func(t time.Time) time.Time {
		if t.IsZero() {
			return time.Time{}
		}
		return t.Truncate(time.Microsecond).UTC()
	}
	c.State = backend.StateActive
	c.Attempt = 1
	c.LeaseToken = 1
	c.WorkerID = worker
	c.StartedAt = stored(now)
	c.LeaseExpiresAt = stored(expires)
	c.RunAt = stored(c.RunAt)
	c.CreatedAt = stored(c.CreatedAt)
	c.Deadline = stored(c.Deadline)
	if c.Payload == nil {
		c.Payload = []byte{}
	}
	if len(c.Tags) == 0 {
		c.Tags = nil
	}
	if len(c.Metadata) == 0 {
		c.Metadata = nil
	}
	return &c
}

// fillPipelined sends the enqueue's one statement and one claim statement
// for each claim in a pipeline, a transaction of its own, and sets fills
// from what it claimed (see enqueueFilling).
func (s *store) fillPipelined(ctx context.Context, op string, write func(runner) error,
	ps []backend.ClaimParams, orders [][]string, fills []claimFill) (bool, error) {
	b := &pgx.Batch{}
	if err := write(batchRunner{b}); err != nil {
		return true, s.wrap(op, err)
	}
	writes := b.Len()
	for i, p := range ps {
		sql, args := s.claimStatement(p, orders[i][0], nil)
		b.Queue(sql, args...)
	}
	br := s.pool.SendBatch(ctx, b)
	for range writes {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return true, s.wrap(op, err)
		}
	}
	got := make([][]*backend.Job, len(ps))
	stopped := make([]bool, len(ps))
	errs := make([]error, len(ps))
	var claimErr error
	for i, p := range ps {
		rows, err := br.Query()
		if err == nil {
			got[i], stopped[i], err = collectClaim(p, rows)
		}
		if errs[i] = err; err != nil && claimErr == nil {
			claimErr = err
		}
	}
	if err := br.Close(); err != nil || serverError(claimErr) {
		if serverError(err) || serverError(claimErr) {
			return false, nil // rolled back: the enqueue goes alone
		}
		return true, s.wrap(op, err)
	}
	// Committed. A claim with a row that did not decode gives back the
	// jobs it read, as Claim does, and claims again itself.
	for i, p := range ps {
		if errs[i] != nil {
			s.handBack(ctx, got[i], p.Now)
			continue
		}
		res, _ := s.claimRest(ctx, s.pool, p, orders[i][:1], got[i], stopped[i])
		fills[i] = claimFill{res: res}
	}
	return true, nil
}

// fillInTx writes the enqueue in a transaction and claims for each claim
// in it, queue by queue as Claim does, and sets fills from what it
// claimed once it commits (see enqueueFilling).
func (s *store) fillInTx(ctx context.Context, op string, write func(runner) error,
	ps []backend.ClaimParams, orders [][]string, fills []claimFill) (bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return true, s.wrap(op, err)
	}
	if err := write(pgxRunner{tx}); err != nil {
		tx.Rollback(ctx) //nolint:errcheck // the first error is the one to report
		return true, s.wrap(op, err)
	}
	res := make([]backend.ClaimResult, len(ps))
	for i, p := range ps {
		sql, args := s.claimStatement(p, orders[i][0], nil)
		rows, err := tx.Query(ctx, sql, args...)
		var jobs []*backend.Job
		var stopped bool
		if err == nil {
			jobs, stopped, err = collectClaim(p, rows)
		}
		if err == nil {
			res[i], err = s.claimRest(ctx, tx, p, orders[i], jobs, stopped)
		}
		if err != nil {
			// Nothing is written yet: the enqueue goes alone.
			tx.Rollback(ctx) //nolint:errcheck // the enqueue is written again
			return false, nil
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return true, s.wrap(op, err)
	}
	for i := range res {
		fills[i] = claimFill{res: res[i]}
	}
	return true, nil
}

// serverError says whether err is an error the server reported for a
// statement, after which its transaction is rolled back, rather than a
// failure of the connection, after which the commit's fate is unknown.
func serverError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

// batchRunner queues the statements of the enqueue path in a batch
// instead of running them; for statements whose rows are not read.
type batchRunner struct {
	b *pgx.Batch
}

func (r batchRunner) run(_ context.Context, query string, args []any, _ func(scan func(dest ...any) error) error) error {
	r.b.Queue(query, args...)
	return nil
}
