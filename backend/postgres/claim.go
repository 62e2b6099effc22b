package postgres

import (
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kyuhq/kyu/backend"
)

// Claim leases up to p.Max jobs from p.Queues. It first promotes the due
// scheduled and retry jobs of those queues and cancels their waiting jobs
// past the deadline (at most MaintenanceLimit of them), then takes pending
// jobs queue by queue in the order p.Mode gives, each in claim order
// (priority, run-at, id), skipping the rows other claimers hold. With
// p.Types only the jobs of those types are read (sqlClaimTyped).
func (s *store) Claim(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.ClaimResult{}, err
	}
	defer s.end()
	queues := claimOrder(p)
	if p.Max <= 0 || len(queues) == 0 {
		return backend.ClaimResult{}, nil
	}

	// One round trip for the common case: the step and the first queue's
	// claim go together in a pipeline.
	batch := &pgx.Batch{}
	batch.Queue(s.sqls.step, p.Now, queues, s.opts.MaintenanceLimit, s.channel)
	sql, args := s.claimStatement(p, queues[0], nil)
	batch.Queue(sql, args...)
	br := s.pool.SendBatch(ctx, batch)
	var promoted, cancelled, notified int64
	if err := br.QueryRow().Scan(&promoted, &cancelled, &notified); err != nil {
		br.Close()
		return backend.ClaimResult{}, s.wrap("claim: promote", err)
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return backend.ClaimResult{}, s.wrap("claim", err)
	}
	jobs, stopped, err := collectClaim(p, rows)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		s.handBack(ctx, jobs, p.Now)
		return backend.ClaimResult{}, s.wrap("claim", err)
	}
	res, err := s.claimRest(ctx, s.pool, p, queues, jobs, stopped)
	if err != nil {
		s.handBack(ctx, res.Jobs, p.Now)
		return backend.ClaimResult{}, s.wrap("claim", err)
	}
	return res, nil
}

// claimOrder is the order in which a claim for p visits its queues: p's
// order without repeats, or one drawn by weight for ClaimWeighted.
func claimOrder(p backend.ClaimParams) []string {
	queues := distinct(p.Queues)
	if p.Mode == backend.ClaimWeighted {
		queues = weightedOrder(queues, p.Weights)
	}
	return queues
}

// claimStatement is the statement, with its arguments, that claims for p
// from queue q, the jobs claimed taken from p's earlier queues already.
func (s *store) claimStatement(p backend.ClaimParams, q string, claimed []*backend.Job) (string, []any) {
	expires := p.Now.Add(p.Lease)
	worker := nullText(p.WorkerID)
	if p.MaxBytes <= 0 && len(p.Types) == 0 {
		return s.sqls.claim, []any{p.Now, q, p.Max - len(claimed), worker, expires}
	}
	left := int64(math.MaxInt64)
	if p.MaxBytes > 0 {
		left = int64(p.MaxBytes)
		for _, j := range claimed {
			left -= int64(len(j.Payload))
		}
	}
	args := []any{p.Now, q, p.Max - len(claimed), worker, expires, left, len(claimed) > 0}
	if len(p.Types) > 0 {
		return s.sqls.claimTyped, append(args, p.Types)
	}
	return s.sqls.claimBounded, args
}

// collectClaim reads the rows of claimStatement for p and closes them: the
// jobs in claim order, and whether the claim stopped for its byte budget.
func collectClaim(p backend.ClaimParams, rows pgx.Rows) ([]*backend.Job, bool, error) {
	var jobs []*backend.Job
	var stopped bool
	var err error
	if p.MaxBytes <= 0 && len(p.Types) == 0 {
		jobs, err = collectJobs(rows)
	} else {
		jobs, stopped, err = collectClaimed(rows)
	}
	sortClaimed(jobs)
	return jobs, stopped, err
}

// claimRest goes on with a claim for p on q (the pool, or a transaction)
// once the first queue of order gave jobs, stopped saying whether that
// claim stopped for its budget: it claims from the next queues until p.Max
// is reached, and returns the jobs highest priority first. On an error it
// returns the jobs claimed so far with it.
func (s *store) claimRest(ctx context.Context, q pgxQuerier, p backend.ClaimParams, order []string, jobs []*backend.Job, stopped bool) (backend.ClaimResult, error) {
	for _, queue := range order[1:] {
		if len(jobs) >= p.Max || stopped {
			break
		}
		sql, args := s.claimStatement(p, queue, jobs)
		rows, err := q.Query(ctx, sql, args...)
		var more []*backend.Job
		if err == nil {
			more, stopped, err = collectClaim(p, rows)
		}
		if err != nil {
			return backend.ClaimResult{Jobs: append(jobs, more...)}, err
		}
		jobs = append(jobs, more...)
	}
	s.vacuum.note(len(jobs))
	// Highest priority first across queues; queue order within a priority.
	slices.SortStableFunc(jobs, func(a, b *backend.Job) int { return cmp.Compare(b.Priority, a.Priority) })
	return backend.ClaimResult{Jobs: jobs, Truncated: stopped}, nil
}

// handBack releases jobs claimed by a Claim that then failed, so they are
// pending again at once rather than after their lease; if that fails too,
// lease recovery brings them back.
func (s *store) handBack(ctx context.Context, jobs []*backend.Job, now time.Time) {
	if len(jobs) == 0 {
		return
	}
	leases := make([]backend.Lease, len(jobs))
	for i, j := range jobs {
		leases[i] = backend.Lease{JobID: j.ID, Token: j.LeaseToken}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	b := newLeaseBatch(leases)
	rows, err := s.pool.Query(ctx, s.sqls.release, now, b.ids, b.tokens, jsonTime(now), s.channel)
	if err == nil {
		err = s.settle(ctx, b, rows)
	}
	if err != nil {
		s.log.Warn("kyu/postgres: could not hand back the jobs of a failed claim; they return when their leases expire",
			"jobs", len(jobs), "err", err)
	}
}

// collectJobs reads every row of a job query and closes it. A row that
// does not decode is skipped and its error returned beside the good jobs.
func collectJobs(rows pgx.Rows) ([]*backend.Job, error) {
	defer rows.Close()
	var jobs []*backend.Job
	var bad error
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			if bad == nil {
				bad = err
			}
			continue
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return jobs, err
	}
	return jobs, bad
}

// collectClaimed reads the rows of sqlClaimBounded and closes them: the jobs,
// and whether the claim stopped for its byte budget. A row that does not
// decode is skipped and its error returned beside the good jobs.
func collectClaimed(rows pgx.Rows) ([]*backend.Job, bool, error) {
	defer rows.Close()
	var jobs []*backend.Job
	var stopped bool
	var bad error
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) == 0 {
			continue
		}
		if raw[0] == nil { // no job claimed: only the flag
			if err := rows.Scan(append(make([]any, len(raw)-1), &stopped)...); err != nil && bad == nil {
				bad = err
			}
			continue
		}
		j, err := scanJobExtra(rows, false, &stopped)
		if err != nil {
			if bad == nil {
				bad = err
			}
			continue
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return jobs, stopped, err
	}
	return jobs, stopped, bad
}

// sortClaimed puts the jobs claimed from one queue in claim order (an
// UPDATE returns its rows in no particular order).
func sortClaimed(jobs []*backend.Job) {
	slices.SortFunc(jobs, func(a, b *backend.Job) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), a.RunAt.Compare(b.RunAt), cmp.Compare(a.ID, b.ID))
	})
}

// weightedOrder draws an order of the queues at random, each next queue
// chosen with a chance proportional to its weight (default 1). Queues
// weighted 0 or less are left out.
func weightedOrder(queues []string, weights map[string]int) []string {
	type wq struct {
		q string
		w int
	}
	left := make([]wq, 0, len(queues))
	total := 0
	for _, q := range queues {
		w, ok := weights[q]
		if !ok {
			w = 1
		}
		if w > 0 {
			left = append(left, wq{q, w})
			total += w
		}
	}
	out := make([]string, 0, len(left))
	for len(left) > 0 {
		n := rand.IntN(total)
		for i, c := range left {
			if n -= c.w; n < 0 {
				out = append(out, c.q)
				total -= c.w
				left = append(left[:i], left[i+1:]...)
				break
			}
		}
	}
	return out
}

// distinct returns the names in their first order without repeats.
func distinct(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
