package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/kyuhq/kyu/backend"
)

// Claim leases up to p.Max jobs from p.Queues in one transaction. It first
// promotes the due scheduled and retry jobs of those queues and cancels
// their waiting jobs past the deadline (at most MaintenanceLimit of them),
// then takes pending jobs queue by queue in the order p.Mode gives, each
// in claim order (priority, run-at, id) over the index jobs_claim,
// skipping the rows other claimers hold (FOR UPDATE SKIP LOCKED).
func (s *store) Claim(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.ClaimResult{}, err
	}
	defer s.end()
	queues := distinct(p.Queues)
	if p.Mode == backend.ClaimWeighted {
		queues = weightedOrder(queues, p.Weights)
	}
	if p.Max <= 0 || len(queues) == 0 {
		return backend.ClaimResult{}, nil
	}
	var res backend.ClaimResult
	var e *effects
	// Two round trips when no job is due for promotion: one begins the
	// transaction, probes for due jobs and reads the first queue's
	// claimable jobs; the other marks them claimed and commits.
	err := s.inConnTx(ctx, func(c *sql.Conn) error {
		res = backend.ClaimResult{}
		e = s.newEffects()
		first, due, err := s.openClaim(ctx, c, p, queues)
		if err != nil {
			return err
		}
		if due {
			if _, err := s.stepDue(ctx, c, e, p.Now, queues, s.opts.MaintenanceLimit); err != nil {
				return err
			}
			if err := e.flushRows(ctx, c); err != nil {
				return err
			}
		}
		used := 0
		var taken []*row
		for i, q := range queues {
			if len(taken) >= p.Max || res.Truncated {
				break
			}
			// Promotions may have put jobs before those read first:
			// then the first queue is read again.
			var pre []*row
			read := i == 0 && !due
			if read {
				pre = first
			}
			got, stopped, err := s.claimQueue(ctx, c, e, p, q, len(taken), &used, pre, read)
			if err != nil {
				return err
			}
			taken = append(taken, got...)
			res.Truncated = stopped
		}
		if err := e.flush(ctx, c); err != nil {
			return err
		}
		if len(taken) == 0 {
			_, err := c.ExecContext(ctx, "COMMIT")
			return err
		}
		ids := make([]any, len(taken))
		for i, r := range taken {
			ids[i] = r.ID
		}
		expires := p.Now.Add(p.Lease)
		args := append([]any{nullString(p.WorkerID), micros(p.Now), micros(expires)}, ids...)
		if _, err := c.ExecContext(ctx, fmt.Sprintf(s.sqls.markClaimed, placeholders(len(ids)))+commitTx, args...); err != nil {
			return err
		}
		for _, r := range taken {
			r.State = backend.StateActive
			r.Attempt++
			r.LeaseToken++
			r.WorkerID = p.WorkerID
			r.StartedAt = p.Now
			r.LeaseExpiresAt = expires
			res.Jobs = append(res.Jobs, r.Job)
		}
		return nil
	})
	if err != nil {
		return backend.ClaimResult{}, s.wrap("claim", err)
	}
	e.announce()
	for _, j := range res.Jobs {
		s.claimed.add(j.ID, j.Queue)
	}
	// Highest priority first across queues; queue order within a priority.
	slices.SortStableFunc(res.Jobs, func(a, b *backend.Job) int { return cmp.Compare(b.Priority, a.Priority) })
	return res, nil
}

// claimQueue takes claimable jobs of queue q in claim order, up to the
// claim's Max (have are taken already) and within its byte budget (used
// bytes so far); it cancels the jobs it meets past their deadline. stopped
// says the budget ended the claim. With read set, rows are its first read
// of q's jobs, made already (see openClaim).
func (s *store) claimQueue(ctx context.Context, tx queryer, e *effects, p backend.ClaimParams, q string, have int, used *int, rows []*row, read bool) (taken []*row, stopped bool, err error) {
	for {
		want := p.Max - have - len(taken)
		if !read {
			rows = nil
			query, args := s.claimQuery(p, q, want)
			if err := s.queryRows(ctx, tx, query, args, true, func(r *row) { rows = append(rows, r) }); err != nil {
				return nil, false, err
			}
		}
		read = false
		expired := 0
		for _, r := range rows {
			if !r.Deadline.IsZero() && !p.Now.Before(r.Deadline) {
				if err := e.loadSettings(ctx, tx, []string{r.Queue}); err != nil {
					return nil, false, err
				}
				e.cancelled(r, backend.CancelReasonDeadline, p.Now)
				expired++
				continue
			}
			if p.MaxBytes > 0 && have+len(taken) > 0 && *used+len(r.Payload) > p.MaxBytes {
				return taken, true, nil
			}
			*used += len(r.Payload)
			taken = append(taken, r)
		}
		// Rows cancelled for their deadline left room: write them, so
		// that the next read passes them, and read on.
		if expired == 0 || len(rows) < want {
			return taken, false, nil
		}
		if err := e.flushRows(ctx, tx); err != nil {
			return nil, false, err
		}
	}
}

// claimQuery is the query that reads and locks up to want claimable jobs
// of queue q, with its arguments.
func (s *store) claimQuery(p backend.ClaimParams, q string, want int) (string, []any) {
	if len(p.Types) > 0 {
		return fmt.Sprintf(s.sqls.claimTyped, placeholders(len(p.Types))), append(append([]any{q, q}, anyArgs(p.Types)...), want)
	}
	return s.sqls.claim, []any{q, q, want}
}

// openClaim begins c's transaction and, in the same round trip, probes
// p's queues for jobs due for promotion and reads the first queue's
// claimable jobs.
func (s *store) openClaim(ctx context.Context, c *sql.Conn, p backend.ClaimParams, queues []string) (first []*row, due bool, err error) {
	probe, args := s.probe(p.Now, queues)
	claim, cargs := s.claimQuery(p, queues[0], p.Max)
	rows, err := c.QueryContext(ctx, beginTx+probe+"; "+claim, append(args, cargs...)...)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, false, errors.Join(errors.New("kyu/mysql: claim: the probe gave no row"), rows.Err())
	}
	if err := rows.Scan(&due); err != nil {
		return nil, false, err
	}
	if !rows.NextResultSet() {
		return nil, false, errors.Join(errors.New("kyu/mysql: claim: no jobs read"), rows.Err())
	}
	for rows.Next() {
		r, err := scanRow(rows, true)
		if err != nil {
			return nil, false, err
		}
		first = append(first, r)
	}
	return first, due, rows.Err()
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
