package pebble

import (
	"context"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// maintain runs one maintenance step under mu and waits for its commit.
func (s *Store) maintain(ctx context.Context, p backend.MaintenanceParams, step func(now time.Time, limit int) (backend.MaintenanceResult, error)) (backend.MaintenanceResult, error) {
	if err := backend.CheckNow(p.Now); err != nil {
		return backend.MaintenanceResult{}, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = s.opts.MaintenanceLimit
	}
	if err := s.begin(ctx); err != nil {
		return backend.MaintenanceResult{}, err
	}
	defer s.end()
	if err := s.lockState(); err != nil {
		return backend.MaintenanceResult{}, err
	}
	mark := s.writes
	res, err := step(p.Now, limit)
	g := s.groupSince(mark)
	s.unlock()
	if err != nil {
		return backend.MaintenanceResult{}, err
	}
	if err := wait(g); err != nil {
		return backend.MaintenanceResult{}, err
	}
	return res, nil
}

// Promote moves scheduled and retry jobs whose run-at has come to pending
// and cancels waiting jobs whose deadline has passed, at most Limit in all.
func (s *Store) Promote(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	return s.maintain(ctx, p, func(now time.Time, limit int) (backend.MaintenanceResult, error) {
		var res backend.MaintenanceResult
		for _, qi := range s.idx.queues {
			n := limit - res.Moved - res.Cancelled
			if n <= 0 {
				break
			}
			moved, cancelled, err := s.promoteQueue(qi, now, n)
			res.Moved += moved
			res.Cancelled += cancelled
			if err != nil {
				return res, err
			}
		}
		nowCode := timeCode(now)
		dl := &s.idx.deadlines
		for res.Moved+res.Cancelled < limit && dl.len() > 0 && dl.peek().at <= nowCode {
			e := dl.pop()
			j, hasPayload, err := s.load(e.id)
			if err != nil {
				return res, err
			}
			if j == nil || !waiting(j.State) || timeCode(j.Deadline) != e.at {
				continue // started, finished or deleted since
			}
			s.cancelForDeadline(e.id, j, hasPayload, now)
			res.Cancelled++
		}
		return res, nil
	})
}

// RecoverLeases ends leases expired at Now, at most Limit: the attempt is
// recorded as lease_expired and the job goes back to pending, or to failed
// when its attempts are used up. Moved counts both; Failed the latter.
func (s *Store) RecoverLeases(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	return s.maintain(ctx, p, func(now time.Time, limit int) (backend.MaintenanceResult, error) {
		var res backend.MaintenanceResult
		nowCode := timeCode(now)
		h := &s.idx.leaseExpiry
		for res.Moved < limit && h.len() > 0 && h.peek().at <= nowCode {
			e := h.pop()
			if le, ok := s.idx.leases[e.id]; !ok || le.expires != e.at {
				continue // finished or extended since
			}
			j, hasPayload, err := s.load(e.id)
			if err != nil {
				return res, err
			}
			if j == nil || j.State != backend.StateActive {
				delete(s.idx.leases, e.id)
				continue
			}
			j.Errors = append(j.Errors, backend.AttemptError{
				Attempt: j.Attempt, At: now, Kind: backend.AttemptLeaseExpired, Message: "lease expired",
			})
			if j.Attempt >= j.MaxAttempts {
				s.toFinal(e.id, j, hasPayload, backend.StateFailed, now)
				res.Moved++
				res.Failed++
				continue
			}
			s.toPending(e.id, j, hasPayload)
			s.idx.watchDeadline(e.id, j)
			res.Moved++
		}
		return res, nil
	})
}

// ApplyRetention deletes, at most Limit, final jobs whose retention has run
// out at Now (Moved), and forgets, at most Limit, unique keys whose
// UniqueFor period has ended.
func (s *Store) ApplyRetention(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	return s.maintain(ctx, p, func(now time.Time, limit int) (backend.MaintenanceResult, error) {
		var res backend.MaintenanceResult
		nowCode := timeCode(now)
		h := &s.idx.retention
		for res.Moved < limit && h.len() > 0 && h.peek().at <= nowCode {
			e := h.pop()
			j, hasPayload, err := s.load(e.id)
			if err != nil {
				return res, err
			}
			if j == nil || !j.State.Final() {
				continue
			}
			if at, ok := j.DeleteAt(); !ok || timeCode(at) != e.at {
				continue
			}
			s.deleteJob(e.id, j, hasPayload)
			res.Moved++
		}
		u := &s.idx.uniqueExpiry
		for n := 0; n < limit && u.len() > 0 && u.peek().until <= nowCode; {
			e := u.pop()
			if v, ok := s.idx.uniques[e.name]; !ok || v.until != e.until {
				continue
			}
			s.dropUnique(e.name)
			n++
		}
		return res, nil
	})
}
