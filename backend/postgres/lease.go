package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kyuhq/kyu/backend"
)

// leaseBatch holds the leases of one batch call that name possible jobs,
// in the form the statements take, and remembers each item's place.
type leaseBatch struct {
	ids    []string
	tokens []int64
	// pos maps a row of ids to its item.
	pos []int
	// errs has one error per item; items whose id is no job id start as
	// ErrNotFound and never reach the database.
	errs []error
	// canon is each item's id in canonical form ("" when not an id).
	canon []string
}

// newLeaseBatch sorts the leases into a batch.
func newLeaseBatch(leases []backend.Lease) *leaseBatch {
	b := &leaseBatch{errs: make([]error, len(leases)), canon: make([]string, len(leases))}
	for i, l := range leases {
		id, err := uuid.Parse(l.JobID)
		if err != nil {
			b.errs[i] = backend.ErrNotFound
			continue
		}
		b.canon[i] = id.String()
		b.ids = append(b.ids, b.canon[i])
		b.tokens = append(b.tokens, l.Token)
		b.pos = append(b.pos, i)
	}
	return b
}

// sortByID puts the batch's rows in id order (the canonical text form
// sorts as the ids do).
func (b *leaseBatch) sortByID() {
	order := make([]int, len(b.ids))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(x, y int) int { return strings.Compare(b.ids[x], b.ids[y]) })
	ids, tokens, pos := make([]string, len(order)), make([]int64, len(order)), make([]int, len(order))
	for k, o := range order {
		ids[k], tokens[k], pos[k] = b.ids[o], b.tokens[o], b.pos[o]
	}
	b.ids, b.tokens, b.pos = ids, tokens, pos
}

// settle reads the ids a statement acted on and sets the error of every
// other item: ErrNotFound when its job does not exist, ErrLeaseLost
// otherwise. Rows with an empty id (notifications) are skipped.
func (s *store) settle(ctx context.Context, b *leaseBatch, rows pgx.Rows) error {
	done := map[string]bool{}
	if err := readDone(rows, done); err != nil {
		return err
	}
	return s.settleDone(ctx, b, done)
}

// readDone adds the ids of rows to done and closes rows. Empty ids
// (notifications) are skipped.
func readDone(rows pgx.Rows, done map[string]bool) error {
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		if id != "" {
			done[id] = true
		}
	}
	rows.Close()
	return rows.Err()
}

// settleDone sets the error of every item of b whose id is not in done, as
// settle does.
func (s *store) settleDone(ctx context.Context, b *leaseBatch, done map[string]bool) error {
	var missing []string
	for _, i := range b.pos {
		if !done[b.canon[i]] {
			missing = append(missing, b.canon[i])
		}
	}
	if len(missing) == 0 {
		return nil
	}
	exists := map[string]bool{}
	rows, err := s.pool.Query(ctx, s.sqls.existing, missing)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		exists[id] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, i := range b.pos {
		switch {
		case done[b.canon[i]]:
		case exists[b.canon[i]]:
			b.errs[i] = backend.ErrLeaseLost
		default:
			b.errs[i] = backend.ErrNotFound
		}
	}
	return nil
}

// Heartbeat extends the live leases among p.Leases to p.Now+p.Extend in
// one statement.
func (s *store) Heartbeat(ctx context.Context, p backend.HeartbeatParams) (backend.HeartbeatResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.HeartbeatResult{}, err
	}
	defer s.end()
	b := newLeaseBatch(p.Leases)
	expires := p.Now.Add(p.Extend)
	live := map[string]bool{}
	requested := map[string]bool{}
	if len(b.ids) > 0 {
		rows, err := s.pool.Query(ctx, s.sqls.heartbeat, p.Now, b.ids, b.tokens, expires)
		if err != nil {
			return backend.HeartbeatResult{}, s.wrap("heartbeat", err)
		}
		for rows.Next() {
			var id string
			var cancel bool
			if err := rows.Scan(&id, &cancel); err != nil {
				rows.Close()
				return backend.HeartbeatResult{}, s.wrap("heartbeat", err)
			}
			live[id], requested[id] = true, cancel
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return backend.HeartbeatResult{}, s.wrap("heartbeat", err)
		}
	}
	res := backend.HeartbeatResult{Leases: make([]backend.LeaseStatus, len(p.Leases))}
	for i := range p.Leases {
		if b.canon[i] != "" && live[b.canon[i]] {
			res.Leases[i] = backend.LeaseStatus{ExpiresAt: expires, CancelRequested: requested[b.canon[i]]}
		} else {
			res.Leases[i] = backend.LeaseStatus{Lost: true}
		}
	}
	return res, nil
}

// Complete finishes the jobs of the live leases among p.Items in one
// statement, storing their results (and deleting those kept for no time).
func (s *store) Complete(ctx context.Context, p backend.CompleteParams) (backend.BatchResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.BatchResult{}, err
	}
	defer s.end()
	leases := make([]backend.Lease, len(p.Items))
	for i, it := range p.Items {
		leases[i] = it.Lease
	}
	b := newLeaseBatch(leases)
	if len(b.ids) == 0 {
		return backend.BatchResult{Errors: b.errs}, nil
	}
	b.sortByID()
	results := make([][]byte, len(b.ids))
	for k, i := range b.pos {
		results[k] = p.Items[i].Result
	}
	minute := backend.MinuteOf(p.Now)
	// The common case in one lean UPDATE; the rest (cancel requested,
	// deleted on completion, or a lease that is no longer live) through
	// the general statement.
	done := map[string]bool{}
	rows, err := s.pool.Query(ctx, s.sqls.completeLean, p.Now, b.ids, b.tokens, results, minute)
	if err == nil {
		err = readDone(rows, done)
	}
	if isDeadlock(err) {
		// The lean statement updates in id order only when its plan drives
		// the join from the ids (TestCompleteLeanPlan); should a plan ever
		// not, and another batch wait on it in a circle, the general
		// statement, which locks in id order, does it all.
		clear(done)
		err = nil
	}
	if err != nil {
		return backend.BatchResult{}, s.wrap("complete", err)
	}
	var ids []string
	var tokens []int64
	var res [][]byte
	for k, id := range b.ids {
		if !done[id] {
			ids, tokens, res = append(ids, id), append(tokens, b.tokens[k]), append(res, results[k])
		}
	}
	if len(ids) > 0 {
		rows, err := s.pool.Query(ctx, s.sqls.complete, p.Now, ids, tokens, res, minute)
		if err == nil {
			err = readDone(rows, done)
		}
		if err != nil {
			return backend.BatchResult{}, s.wrap("complete", err)
		}
	}
	if err := s.settleDone(ctx, b, done); err != nil {
		return backend.BatchResult{}, s.wrap("complete", err)
	}
	return backend.BatchResult{Errors: b.errs}, nil
}

// Fail ends the attempts of the live leases among p.Items in one
// statement: to retry, to pending at once, or to failed.
func (s *store) Fail(ctx context.Context, p backend.FailParams) (backend.BatchResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.BatchResult{}, err
	}
	defer s.end()
	leases := make([]backend.Lease, len(p.Items))
	for i, it := range p.Items {
		leases[i] = it.Lease
	}
	b := newLeaseBatch(leases)
	if len(b.ids) == 0 {
		return backend.BatchResult{Errors: b.errs}, nil
	}
	n := len(b.ids)
	messages, stacks := make([]string, n), make([]string, n)
	retryAt, final, cancel := make([]pgtype.Timestamptz, n), make([]bool, n), make([]bool, n)
	for k, i := range b.pos {
		it := p.Items[i]
		messages[k], stacks[k], retryAt[k], final[k], cancel[k] = it.Message, it.Stack, nullTime(it.RetryAt), it.Final, it.Cancel
	}
	rows, err := s.pool.Query(ctx, s.sqls.fail, p.Now, b.ids, b.tokens, messages, stacks, retryAt, final, jsonTime(p.Now), s.channel,
		cancel, backend.MinuteOf(p.Now))
	if err != nil {
		return backend.BatchResult{}, s.wrap("fail", err)
	}
	if err := s.settle(ctx, b, rows); err != nil {
		return backend.BatchResult{}, s.wrap("fail", err)
	}
	return backend.BatchResult{Errors: b.errs}, nil
}

// Release hands the jobs of the live leases among p.Leases back to pending
// in one statement, recording their attempts as interrupted.
func (s *store) Release(ctx context.Context, p backend.ReleaseParams) (backend.BatchResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.BatchResult{}, err
	}
	defer s.end()
	b := newLeaseBatch(p.Leases)
	if len(b.ids) == 0 {
		return backend.BatchResult{Errors: b.errs}, nil
	}
	rows, err := s.pool.Query(ctx, s.sqls.release, p.Now, b.ids, b.tokens, jsonTime(p.Now), s.channel)
	if err != nil {
		return backend.BatchResult{}, s.wrap("release", err)
	}
	if err := s.settle(ctx, b, rows); err != nil {
		return backend.BatchResult{}, s.wrap("release", err)
	}
	return backend.BatchResult{Errors: b.errs}, nil
}

// jsonTime is t as an AttemptError's JSON "at" field.
func jsonTime(t time.Time) string {
	return t.UTC().Format(time.RFC3339Nano)
}

// isDeadlock reports whether err is the server's deadlock error, which
// rolled back the statement.
func isDeadlock(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "40P01"
}
