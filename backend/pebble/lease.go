package pebble

import (
	"context"
	"slices"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// checkLease finds the job a lease names and checks that the lease is live
// at now: the job is active, the token is its current one and the lease
// has not expired. It returns ErrNotFound for an unknown job and
// ErrLeaseLost for a lease that is not live; mu must be held.
func (s *store) checkLease(l backend.Lease, now time.Time) (jobID, error) {
	id, ok := parseID(l.JobID)
	if !ok {
		return id, backend.ErrNotFound
	}
	if le, ok := s.idx.leases[id]; ok && le.token == l.Token && timeCode(now) < le.expires {
		return id, nil
	}
	j, _, err := s.load(id)
	switch {
	case err != nil:
		return id, err
	case j == nil:
		return id, backend.ErrNotFound
	}
	return id, backend.ErrLeaseLost
}

// leaseOp runs fn for every lease in one commit. fn is called with mu held
// for each live lease, with the job's current record; items whose lease is
// not live get their error and change nothing. The caller has checked its
// parameters.
func (s *store) leaseOp(ctx context.Context, leases []backend.Lease, now time.Time, fn func(i int, id jobID, j *backend.Job, sd side)) ([]error, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	if err := s.lockState(); err != nil {
		return nil, err
	}
	errs := make([]error, len(leases))
	mark := s.writes
	for i, l := range leases {
		id, err := s.checkLease(l, now)
		if err == nil {
			var j *backend.Job
			var sd side
			j, sd, err = s.load(id)
			if err == nil {
				fn(i, id, j, sd)
			}
		}
		if err != nil && err != backend.ErrNotFound && err != backend.ErrLeaseLost {
			s.unlock()
			return nil, err
		}
		errs[i] = err
	}
	g := s.groupSince(mark)
	if g == nil && slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		// A lease lost to a change not yet durable (a recovery, a
		// delete) is reported once that change is.
		g = s.lastGroup()
	}
	s.unlock()
	if err := wait(g); err != nil {
		return nil, err
	}
	return errs, nil
}

// Heartbeat extends live leases to Now+Extend; the new expiry is durable
// when it returns.
func (s *store) Heartbeat(ctx context.Context, p backend.HeartbeatParams) (backend.HeartbeatResult, error) {
	res := backend.HeartbeatResult{Leases: make([]backend.LeaseStatus, len(p.Leases))}
	expires := p.Now.Add(p.Extend)
	errs, err := s.leaseOp(ctx, p.Leases, p.Now, func(i int, id jobID, j *backend.Job, sd side) {
		j.LeaseExpiresAt = expires
		s.put(id, j, sd)
		le := lease{token: j.LeaseToken, expires: timeCode(expires), queue: j.Queue, job: j, sd: sd}
		s.idx.leases[id] = le
		s.idx.watchLease(id, le.expires)
		res.Leases[i].ExpiresAt = expires
		res.Leases[i].CancelRequested = j.CancelRequested
	})
	if err != nil {
		return backend.HeartbeatResult{}, err
	}
	for i, e := range errs {
		res.Leases[i].Lost = e != nil
	}
	return res, nil
}

// Complete finishes jobs whose leases are live, storing their results. A
// job whose cancel was requested ends cancelled, its result stored.
func (s *store) Complete(ctx context.Context, p backend.CompleteParams) (backend.BatchResult, error) {
	leases := make([]backend.Lease, len(p.Items))
	for i, it := range p.Items {
		leases[i] = it.Lease
	}
	errs, err := s.leaseOp(ctx, leases, p.Now, func(i int, id jobID, j *backend.Job, sd side) {
		if r := p.Items[i].Result; r != nil {
			j.Result = slices.Clone(r)
		}
		s.countAttempt(j.Queue, p.Now, false)
		if s.cancelRequested(id, j, sd, p.Now) {
			return
		}
		s.toFinal(id, j, sd, backend.StateCompleted, p.Now)
	})
	return backend.BatchResult{Errors: errs}, err
}

// Fail ends attempts with an error: retry at RetryAt (pending at once when
// it is not after Now), or failed when Final or the attempts are used up.
// An item with Cancel ends the job cancelled (reason "handler"); a job
// whose cancel was requested ends cancelled (reason "requested") whatever
// the item says.
func (s *store) Fail(ctx context.Context, p backend.FailParams) (backend.BatchResult, error) {
	leases := make([]backend.Lease, len(p.Items))
	for i, it := range p.Items {
		leases[i] = it.Lease
	}
	errs, err := s.leaseOp(ctx, leases, p.Now, func(i int, id jobID, j *backend.Job, sd side) {
		it := &p.Items[i]
		kind := backend.AttemptFailed
		if it.Cancel {
			kind = backend.AttemptCancelled
		}
		j.Errors = append(j.Errors, backend.AttemptError{
			Attempt: j.Attempt, At: p.Now, Kind: kind, Message: it.Message, Stack: it.Stack,
		})
		s.countAttempt(j.Queue, p.Now, true)
		if s.cancelRequested(id, j, sd, p.Now) {
			return
		}
		if it.Cancel {
			j.CancelReason = backend.CancelReasonHandler
			s.toFinal(id, j, sd, backend.StateCancelled, p.Now)
			return
		}
		if it.Final || j.Attempt >= j.MaxAttempts {
			s.toFinal(id, j, sd, backend.StateFailed, p.Now)
			return
		}
		j.RunAt = it.RetryAt
		if j.RunAt.IsZero() {
			j.RunAt = p.Now
		}
		s.toWaiting(id, j, sd, p.Now)
	})
	return backend.BatchResult{Errors: errs}, err
}

// Release hands active jobs back to pending at once, keeping their RunAt;
// the attempt is recorded as interrupted and given back. A job whose
// cancel was requested ends cancelled instead.
func (s *store) Release(ctx context.Context, p backend.ReleaseParams) (backend.BatchResult, error) {
	errs, err := s.leaseOp(ctx, p.Leases, p.Now, func(i int, id jobID, j *backend.Job, sd side) {
		j.Errors = append(j.Errors, backend.AttemptError{
			Attempt: j.Attempt, At: p.Now, Kind: backend.AttemptInterrupted, Message: "released",
		})
		j.Attempt--
		if s.cancelRequested(id, j, sd, p.Now) {
			return
		}
		s.toPending(id, j, sd)
		s.idx.watchDeadline(id, j)
	})
	return backend.BatchResult{Errors: errs}, err
}
