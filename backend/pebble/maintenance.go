package pebble

import (
	"context"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// maintain runs one maintenance step under mu and waits for its commit.
func (s *store) maintain(ctx context.Context, p backend.MaintenanceParams, step func(now time.Time, limit int) (backend.MaintenanceResult, error)) (backend.MaintenanceResult, error) {
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
func (s *store) Promote(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
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
			j, sd, err := s.load(e.id)
			if err != nil {
				return res, err
			}
			if j == nil || !waiting(j.State) || timeCode(j.Deadline) != e.at {
				continue // started, finished or deleted since
			}
			s.cancelForDeadline(e.id, j, sd, now)
			res.Cancelled++
		}
		return res, nil
	})
}

// RecoverLeases ends leases expired at Now, at most Limit: the attempt is
// recorded as lease_expired and the job goes back to pending, or to failed
// when its attempts are used up. Moved counts both; Failed the latter.
func (s *store) RecoverLeases(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	return s.maintain(ctx, p, func(now time.Time, limit int) (backend.MaintenanceResult, error) {
		var res backend.MaintenanceResult
		nowCode := timeCode(now)
		h := &s.idx.leaseExpiry
		for res.Moved < limit && h.len() > 0 && h.peek().at <= nowCode {
			e := h.pop()
			if le, ok := s.idx.leases[e.id]; !ok || le.expires != e.at {
				continue // finished or extended since
			}
			j, sd, err := s.load(e.id)
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
			s.countAttempt(j.Queue, now, true)
			if s.cancelRequested(e.id, j, sd, now) {
				res.Moved++
				continue
			}
			if j.Attempt >= j.MaxAttempts {
				s.toFinal(e.id, j, sd, backend.StateFailed, now)
				res.Moved++
				res.Failed++
				continue
			}
			s.toPending(e.id, j, sd)
			s.idx.watchDeadline(e.id, j)
			res.Moved++
		}
		return res, nil
	})
}

// ApplyRetention deletes, at most Limit, final jobs whose ExpiresAt has
// come at Now (Moved), and forgets, at most Limit each, unique keys whose
// UniqueFor period has ended, per-minute counters older than
// backend.StatsHistory and expired worker entries.
func (s *store) ApplyRetention(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	return s.maintain(ctx, p, func(now time.Time, limit int) (backend.MaintenanceResult, error) {
		var res backend.MaintenanceResult
		nowCode := timeCode(now)
		moved, err := s.sweepRetention(nowCode, limit)
		res.Moved = moved
		if err != nil {
			return res, err
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
		s.dropMinutes(now, limit)
		s.dropWorkers(now, limit)
		return res, nil
	})
}
