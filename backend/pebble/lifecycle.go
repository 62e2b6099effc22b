package pebble

import (
	"time"

	"github.com/kyuhq/kyu/backend"
)

// The helpers below move a loaded record to its next state: they write it,
// update the indexes and the unique keys, and ask for wake-ups. mu must be
// held by every caller.

// toPending makes j pending (keeping its RunAt) and indexes it.
func (s *store) toPending(id jobID, j *backend.Job, sd side) {
	s.idx.track(j.Queue, id, j.State, backend.StatePending)
	j.State = backend.StatePending
	s.clearLease(id, j)
	s.put(id, j, sd)
	s.idx.index(id, j)
	s.noteState(id, j)
	s.wake(j.Queue)
}

// toWaiting puts a job that left active back in line: pending when its
// RunAt has come, retry otherwise. It watches the deadline again.
func (s *store) toWaiting(id jobID, j *backend.Job, sd side, now time.Time) {
	if j.RunAt.After(now) {
		s.idx.track(j.Queue, id, j.State, backend.StateRetry)
		j.State = backend.StateRetry
		s.clearLease(id, j)
		s.put(id, j, sd)
		s.idx.index(id, j)
		s.noteState(id, j)
	} else {
		s.toPending(id, j, sd)
	}
	s.idx.watchDeadline(id, j)
}

// toFinal moves j to the final state given at now: it is written with
// its ExpiresAt, or deleted at once, as backend.Expiry decides with the
// queue's retention override; its unique key is released as the contract
// says, and its watchers are signalled.
func (s *store) toFinal(id jobID, j *backend.Job, sd side, state backend.State, now time.Time) {
	from := j.State
	j.State = state
	j.FinishedAt = now
	s.clearLease(id, j)
	at, deleteNow := backend.Expiry(j.Retention, s.idx.queueRetention(j.Queue), state, now, len(j.Result) > 0)
	if deleteNow {
		s.deleteJob(id, j, sd, from)
		return
	}
	j.ExpiresAt = at
	s.idx.track(j.Queue, id, from, state)
	s.put(id, j, sd)
	s.putRetention(id, j)
	s.noteState(id, j)
	s.finished(id)
}

// cancelForDeadline discards a waiting job whose deadline has passed.
func (s *store) cancelForDeadline(id jobID, j *backend.Job, sd side, now time.Time) {
	j.CancelReason = backend.CancelReasonDeadline
	s.toFinal(id, j, sd, backend.StateCancelled, now)
}

// deleteJob removes a job, its payload, its log lines and its JID key;
// from is the state the job's id is tracked under. (Its id stays in the
// retention index until its time: see retention.go.) A unique key without
// UniqueFor is released; one with UniqueFor keeps holding, remembering the
// state.
func (s *store) deleteJob(id jobID, j *backend.Job, sd side, from backend.State) {
	s.remove(id, sd)
	if j.JID != "" {
		s.dropJID(j.JID, id)
	}
	s.idx.track(j.Queue, id, from, "")
	s.finished(id)
	if j.UniqueKey == "" {
		return
	}
	name := uniqueName(j.Queue, j.UniqueKey)
	u, ok := s.idx.uniques[name]
	if !ok || u.holder != id {
		return
	}
	if u.until == 0 {
		s.dropUnique(name)
		return
	}
	u.state = j.State
	s.putUnique(name, u)
}

// noteState keeps the state of a unique key's holder current, and releases
// a key held until its job is final.
func (s *store) noteState(id jobID, j *backend.Job) {
	if j.UniqueKey == "" {
		return
	}
	name := uniqueName(j.Queue, j.UniqueKey)
	u, ok := s.idx.uniques[name]
	if !ok || u.holder != id {
		return
	}
	if u.until == 0 && j.State.Final() {
		s.dropUnique(name)
		return
	}
	u.state = j.State
	s.idx.uniques[name] = u
}

// clearLease ends the lease fields of a job leaving active (the token stays:
// it only grows) and drops it from the lease map.
func (s *store) clearLease(id jobID, j *backend.Job) {
	j.LeaseExpiresAt = time.Time{}
	delete(s.idx.leases, id)
}

// deadlinePassed reports whether a job may no longer start at now.
func deadlinePassed(j *backend.Job, now time.Time) bool {
	return !j.Deadline.IsZero() && !now.Before(j.Deadline)
}
