package pebble

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// jobOp runs fn on one job under mu and returns the job as fn left it,
// payload and logs included, once its writes are durable. It waits first
// for any write of the job in flight, so the record it hands fn, and the
// payload and logs it reads, are durable ones. fn's error is returned
// as is, and fn must change nothing when it returns one.
func (s *store) jobOp(ctx context.Context, text string, fn func(id jobID, j *backend.Job, sd side) error) (*backend.Job, error) {
	id, ok := parseID(text)
	if !ok {
		return nil, backend.ErrNotFound
	}
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	if err := s.lockSettled(id); err != nil {
		return nil, err
	}
	j, sd, err := s.load(id)
	if err == nil && j == nil {
		err = backend.ErrNotFound
	}
	var payload []byte
	var logs []backend.LogLine
	if err == nil {
		payload, logs, err = s.readSide(s.db, id, sd)
	}
	mark := s.writes
	if err == nil {
		err = fn(id, j, sd)
	}
	if err != nil {
		s.unlock()
		return nil, err
	}
	out := j.Clone()
	g := s.groupSince(mark)
	s.unlock()
	if err := wait(g); err != nil {
		return nil, err
	}
	out.Payload, out.Logs = payload, logs
	return out, nil
}

// Retry sends a failed or cancelled job back to pending, as
// backend.RetryParams describes.
func (s *store) Retry(ctx context.Context, p backend.RetryParams) (*backend.Job, error) {
	return s.jobOp(ctx, p.ID, func(id jobID, j *backend.Job, sd side) error {
		if j.State != backend.StateFailed && j.State != backend.StateCancelled {
			return &backend.StateError{Op: "retry", ID: j.ID, State: j.State}
		}
		return s.retry(id, j, sd, p.Now)
	})
}

// retry makes a failed or cancelled job pending again, taking its unique
// key back (an error matching ErrUniqueKeyHeld, and no change, when
// another job holds it); mu must be held.
func (s *store) retry(id jobID, j *backend.Job, sd side, now time.Time) error {
	var name string
	if j.UniqueKey != "" && j.UniqueFor == 0 {
		name = uniqueName(j.Queue, j.UniqueKey)
		if u, ok := s.idx.uniques[name]; ok && u.holder != id && (u.until == 0 || timeCode(now) < u.until) {
			return fmt.Errorf("kyu/pebble: retry job %s: its unique key %q in queue %s is held by job %s: %w",
				j.ID, j.UniqueKey, j.Queue, u.holder, backend.ErrUniqueKeyHeld)
		}
	}
	j.RunAt = now
	if j.MaxAttempts < j.Attempt+1 {
		j.MaxAttempts = j.Attempt + 1
	}
	j.FinishedAt, j.ExpiresAt = time.Time{}, time.Time{}
	j.Result, j.CancelReason, j.CancelRequested = nil, "", false
	if !j.Deadline.IsZero() && !j.Deadline.After(now) {
		j.Deadline = time.Time{}
	}
	if name != "" {
		s.putUnique(name, uniqueValue{holder: id, state: backend.StatePending})
	}
	s.toPending(id, j, sd)
	s.idx.watchDeadline(id, j)
	return nil
}

// RunNow makes a scheduled or retry job pending at once (RunAt = Now).
func (s *store) RunNow(ctx context.Context, p backend.RunNowParams) (*backend.Job, error) {
	return s.jobOp(ctx, p.ID, func(id jobID, j *backend.Job, sd side) error {
		if j.State != backend.StateScheduled && j.State != backend.StateRetry {
			return &backend.StateError{Op: "run now", ID: j.ID, State: j.State}
		}
		j.RunAt = p.Now
		s.toPending(id, j, sd)
		return nil
	})
}

// RetryQueue retries up to p.Limit jobs of a queue in p.State, oldest
// first (from the queue's per-state id set); jobs whose unique key is held
// elsewhere are skipped and not counted.
func (s *store) RetryQueue(ctx context.Context, p backend.RetryQueueParams) (backend.CountResult, error) {
	return s.bulk(ctx, p.Queue, p.State, p.Limit, func(id jobID, j *backend.Job, sd side) (bool, error) {
		err := s.retry(id, j, sd, p.Now)
		if err != nil && !isUniqueHeld(err) {
			return false, err
		}
		return err == nil, nil
	})
}

// Purge deletes up to p.Limit jobs of a queue in p.State (never active),
// oldest first, as Delete does.
func (s *store) Purge(ctx context.Context, p backend.PurgeParams) (backend.CountResult, error) {
	return s.bulk(ctx, p.Queue, p.State, p.Limit, func(id jobID, j *backend.Job, sd side) (bool, error) {
		s.deleteJob(id, j, sd, j.State)
		return true, nil
	})
}

// bulk applies fn, in one section under mu and one commit, to the jobs of
// a queue in a state, oldest first, until fn has counted limit of them.
// The ids are copied a batch at a time, since fn moves them out of the
// set being walked.
func (s *store) bulk(ctx context.Context, queue string, state backend.State, limit int, fn func(id jobID, j *backend.Job, sd side) (bool, error)) (backend.CountResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.CountResult{}, err
	}
	defer s.end()
	if err := s.lockState(); err != nil {
		return backend.CountResult{}, err
	}
	mark := s.writes
	count := 0
	var after *jobID
	for count < limit {
		qi := s.idx.queues[queue]
		if qi == nil {
			break
		}
		it := qi.byState[stateCode(state)].iter(after, false)
		var ids []jobID
		for ; it.valid() && len(ids) < limit-count; it.next() {
			ids = append(ids, it.id())
		}
		if len(ids) == 0 {
			break
		}
		last := ids[len(ids)-1]
		after = &last
		for _, id := range ids {
			j, sd, err := s.load(id)
			if err != nil {
				s.unlock()
				return backend.CountResult{}, err
			}
			if j == nil || j.State != state {
				continue
			}
			ok, err := fn(id, j, sd)
			if err != nil {
				s.unlock()
				return backend.CountResult{}, err
			}
			if ok {
				count++
			}
		}
	}
	g := s.groupSince(mark)
	s.unlock()
	if err := wait(g); err != nil {
		return backend.CountResult{}, err
	}
	return backend.CountResult{Count: count}, nil
}

func isUniqueHeld(err error) bool {
	return err != nil && errors.Is(err, backend.ErrUniqueKeyHeld)
}
