// Package memory is a kyu store that keeps everything in the process's
// memory: for tests, examples and demos. Nothing persists; closing the
// store, or the process ending, loses every job. It keeps the whole
// contract of package backend, conformance suite included (it is the
// suite's reference: a plain reading of the settled semantics), and it
// signals wake-ups (Subscribe, WatchFinished), so a Worker on it starts a
// job as soon as it is enqueued and Client.Wait returns as soon as the
// job ends, without polling.
//
// Every call takes one lock. Claim keeps each queue's waiting jobs
// indexed and touches only the jobs it moves; maintenance and admin calls
// look at every job, so the store suits thousands of jobs, not millions. Memory is bounded as on any store by retention:
// a Worker's maintenance (or the caller's ApplyRetention) deletes final
// jobs whose retention has run out, forgets expired unique keys, old
// per-minute counters and expired worker entries.
//
// Open it with New, or as the URL memory:// through backend/backendurl
// (kyu server --backend memory://).
package memory

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/kyuhq/kyu/backend"
)

type hold struct {
	id    string
	until time.Time // zero: held while the job exists and is not final
	state backend.State
}

// Store is an in-memory job store, its input checked as every store's is
// (backend.Checked). All methods are safe for concurrent use.
type Store struct {
	backend.Backend
}

// store implements backend.Backend on input that backend.Checked has
// checked. A maintenance step with Limit 0 acts on every job it concerns.
type store struct {
	mu       sync.Mutex
	closed   bool
	jobs     map[string]*backend.Job
	holds    map[[2]string]*hold
	jids     map[string]string // JID to the id of the job holding it
	subs     map[chan struct{}][]string
	watchers map[chan struct{}][]string // job ids watched by each WatchFinished
	queues   map[string]backend.QueueSettings
	workers  map[string]*backend.WorkerInfo
	// minutes counts ended attempts per minute: [processed, failed].
	minutes           map[time.Time]*[2]int64
	processed, failed int64
	// leaders holds the Leader leases by name.
	leaders map[string]backend.Leadership
	// queueMinutes counts ended attempts per queue and minute.
	queueMinutes map[queueMinute]*[2]int64
	// queueIndexes holds each queue's waiting jobs in the order Claim
	// takes them.
	queueIndexes map[string]*queueIndex
}

// queueMinute names one queue's counters of one minute.
type queueMinute struct {
	queue  string
	minute time.Time
}

// New returns an empty store.
func New() *Store {
	return &Store{Backend: backend.Checked(newStore())}
}

func newStore() *store {
	return &store{
		jobs:     map[string]*backend.Job{},
		holds:    map[[2]string]*hold{},
		jids:     map[string]string{},
		subs:     map[chan struct{}][]string{},
		watchers: map[chan struct{}][]string{},
		queues:   map[string]backend.QueueSettings{},
		workers:  map[string]*backend.WorkerInfo{},
		minutes:  map[time.Time]*[2]int64{},
		leaders:  map[string]backend.Leadership{},

		queueMinutes: map[queueMinute]*[2]int64{},
		queueIndexes: map[string]*queueIndex{},
	}
}

var _ backend.Backend = (*store)(nil)

func (s *store) lock() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return backend.ErrClosed
	}
	return nil
}

// holder returns the job holding (queue, key) at now, if any.
func (s *store) holder(queue, key string, now time.Time) *hold {
	h := s.holds[[2]string{queue, key}]
	if h == nil {
		return nil
	}
	if j := s.jobs[h.id]; j != nil {
		h.state = j.State
	}
	if !h.until.IsZero() {
		if now.Before(h.until) {
			return h
		}
		return nil
	}
	if j := s.jobs[h.id]; j != nil && !j.State.Final() {
		return h
	}
	return nil
}

func (s *store) signal(queue string) {
	for c, qs := range s.subs {
		if len(qs) == 0 || slices.Contains(qs, queue) {
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}
}

// Enqueue writes new jobs atomically (see backend.Backend).
func (s *store) Enqueue(ctx context.Context, p backend.EnqueueParams) (backend.EnqueueResult, error) {
	if err := s.lock(); err != nil {
		return backend.EnqueueResult{}, err
	}
	defer s.mu.Unlock()
	var res backend.EnqueueResult
	for _, nj := range p.Jobs {
		if h := s.jobs[s.jids[nj.JID]]; nj.JID != "" && h != nil {
			res.Jobs = append(res.Jobs, backend.EnqueuedJob{ID: h.ID, State: h.State, Duplicate: true})
			continue
		}
		if nj.UniqueKey != "" {
			if h := s.holder(nj.Queue, nj.UniqueKey, p.Now); h != nil {
				res.Jobs = append(res.Jobs, backend.EnqueuedJob{ID: h.id, State: h.state, Duplicate: true})
				continue
			}
		}
		id, err := backend.NewID()
		if err != nil {
			return backend.EnqueueResult{}, err
		}
		j := nj.Record(id, p.Now)
		s.jobs[id] = j
		if j.JID != "" {
			s.jids[j.JID] = id
		}
		if nj.UniqueKey != "" {
			h := &hold{id: id, state: j.State}
			if nj.UniqueFor > 0 {
				h.until = p.Now.Add(nj.UniqueFor)
			}
			s.holds[[2]string{nj.Queue, nj.UniqueKey}] = h
		}
		s.index(j)
		if j.State == backend.StatePending {
			s.signal(j.Queue)
		}
		res.Jobs = append(res.Jobs, backend.EnqueuedJob{ID: id, State: j.State})
	}
	return res, nil
}

func before(a, b *backend.Job) int {
	return cmp.Or(cmp.Compare(b.Priority, a.Priority), a.RunAt.Compare(b.RunAt), cmp.Compare(a.ID, b.ID))
}

// finish moves j to a final state at now and applies backend.Expiry:
// delete it at once, or set its ExpiresAt.
func (s *store) finish(j *backend.Job, state backend.State, now time.Time) {
	j.State, j.FinishedAt = state, now
	j.LeaseExpiresAt, j.WorkerID = time.Time{}, ""
	at, deleteNow := backend.Expiry(j.Retention, s.queues[j.Queue].Retention, state, now, len(j.Result) > 0)
	j.ExpiresAt = at
	if deleteNow {
		s.remove(j.ID)
		return
	}
	s.signalFinished(j.ID)
}

// remove deletes a job and tells those watching it.
func (s *store) remove(id string) {
	if j := s.jobs[id]; j != nil && j.JID != "" {
		delete(s.jids, j.JID)
	}
	delete(s.jobs, id)
	s.signalFinished(id)
}

// signalFinished wakes every WatchFinished subscription naming id.
func (s *store) signalFinished(id string) {
	for c, ids := range s.watchers {
		if slices.Contains(ids, id) {
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}
}

// count adds one ended attempt of a job in queue to the minute of now
// (the store's and the queue's) and the totals.
func (s *store) count(queue string, now time.Time, failed bool) {
	m := backend.MinuteOf(now)
	c := s.minutes[m]
	if c == nil {
		c = &[2]int64{}
		s.minutes[m] = c
	}
	qm := queueMinute{queue, m}
	qc := s.queueMinutes[qm]
	if qc == nil {
		qc = &[2]int64{}
		s.queueMinutes[qm] = qc
	}
	c[0]++
	qc[0]++
	s.processed++
	if failed {
		c[1]++
		qc[1]++
		s.failed++
	}
}

// endCancelled ends the attempt of a job whose cancel was requested.
func (s *store) endCancelled(j *backend.Job, reason string, now time.Time) {
	j.CancelReason = reason
	s.finish(j, backend.StateCancelled, now)
}

func (s *store) cancelForDeadline(j *backend.Job, now time.Time) bool {
	if j.Deadline.IsZero() || now.Before(j.Deadline) {
		return false
	}
	j.CancelReason = backend.CancelReasonDeadline
	s.finish(j, backend.StateCancelled, now)
	return true
}

// Claim leases claimable jobs (see backend.Backend). It promotes the due
// jobs of the queues named and takes the first pending jobs from their
// indexes (queueIndex), so it touches only the jobs it moves.
func (s *store) Claim(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	if err := s.lock(); err != nil {
		return backend.ClaimResult{}, err
	}
	defer s.mu.Unlock()
	for _, q := range p.Queues {
		if !s.queues[q].Paused {
			s.promoteDue(q, p.Now)
		}
	}
	var res backend.ClaimResult
	used := 0
	for len(res.Jobs) < p.Max {
		j := s.pick(p)
		if j == nil {
			break
		}
		if p.MaxBytes > 0 && len(res.Jobs) > 0 && used+len(j.Payload) > p.MaxBytes {
			res.Truncated = true
			break
		}
		used += len(j.Payload)
		heap.Pop(s.queueIndexes[j.Queue].ready[j.Type]) // j is its top
		j.State = backend.StateActive
		j.Attempt++
		j.LeaseToken++
		j.WorkerID = p.WorkerID
		j.StartedAt = p.Now
		j.LeaseExpiresAt = p.Now.Add(p.Lease)
		res.Jobs = append(res.Jobs, j.Clone())
	}
	slices.SortStableFunc(res.Jobs, func(a, b *backend.Job) int { return cmp.Compare(b.Priority, a.Priority) })
	return res, nil
}

// head returns the pending job of queue that p would claim first, or nil.
func (s *store) head(queue string, p backend.ClaimParams) *backend.Job {
	qi := s.queueIndexes[queue]
	if qi == nil || s.queues[queue].Paused {
		return nil
	}
	var best *backend.Job
	consider := func(typ string) {
		if j := s.next(queue, typ, p.Now); j != nil && (best == nil || before(j, best) < 0) {
			best = j
		}
	}
	if len(p.Types) > 0 {
		for _, typ := range p.Types {
			consider(typ)
		}
	} else {
		for typ := range qi.ready {
			consider(typ)
		}
	}
	return best
}

// pick returns the job p claims next: the head of the first queue that
// has one, or of a queue drawn at random by weight (ClaimWeighted).
func (s *store) pick(p backend.ClaimParams) *backend.Job {
	if p.Mode != backend.ClaimWeighted {
		for _, q := range p.Queues {
			if j := s.head(q, p); j != nil {
				return j
			}
		}
		return nil
	}
	heads := make([]*backend.Job, len(p.Queues))
	total := 0
	weight := func(i int) int {
		if heads[i] == nil {
			return 0
		}
		if w, ok := p.Weights[p.Queues[i]]; ok {
			return w
		}
		return 1
	}
	for i, q := range p.Queues {
		heads[i] = s.head(q, p)
		total += weight(i)
	}
	if total == 0 {
		return nil
	}
	n := rand.IntN(total)
	for i := range p.Queues {
		if n -= weight(i); n < 0 {
			return heads[i]
		}
	}
	return nil
}

// live returns the job a lease names if the lease is live at now.
func (s *store) live(l backend.Lease, now time.Time) (*backend.Job, error) {
	j := s.jobs[l.JobID]
	if j == nil {
		return nil, backend.ErrNotFound
	}
	if j.State != backend.StateActive || j.LeaseToken != l.Token || !now.Before(j.LeaseExpiresAt) {
		return nil, backend.ErrLeaseLost
	}
	return j, nil
}

// Heartbeat extends live leases.
func (s *store) Heartbeat(ctx context.Context, p backend.HeartbeatParams) (backend.HeartbeatResult, error) {
	if err := s.lock(); err != nil {
		return backend.HeartbeatResult{}, err
	}
	defer s.mu.Unlock()
	var res backend.HeartbeatResult
	for _, l := range p.Leases {
		j, err := s.live(l, p.Now)
		if err != nil {
			res.Leases = append(res.Leases, backend.LeaseStatus{Lost: true})
			continue
		}
		j.LeaseExpiresAt = p.Now.Add(p.Extend)
		res.Leases = append(res.Leases, backend.LeaseStatus{ExpiresAt: j.LeaseExpiresAt, CancelRequested: j.CancelRequested})
	}
	return res, nil
}

// Complete finishes jobs under live leases, storing their results.
func (s *store) Complete(ctx context.Context, p backend.CompleteParams) (backend.BatchResult, error) {
	if err := s.lock(); err != nil {
		return backend.BatchResult{}, err
	}
	defer s.mu.Unlock()
	var res backend.BatchResult
	for _, it := range p.Items {
		j, err := s.live(it.Lease, p.Now)
		if err == nil {
			j.Result = slices.Clone(it.Result)
			s.count(j.Queue, p.Now, false)
			if j.CancelRequested {
				s.endCancelled(j, backend.CancelReasonRequested, p.Now)
			} else {
				s.finish(j, backend.StateCompleted, p.Now)
			}
		}
		res.Errors = append(res.Errors, err)
	}
	return res, nil
}

// Fail ends attempts with an error.
func (s *store) Fail(ctx context.Context, p backend.FailParams) (backend.BatchResult, error) {
	if err := s.lock(); err != nil {
		return backend.BatchResult{}, err
	}
	defer s.mu.Unlock()
	var res backend.BatchResult
	for _, it := range p.Items {
		j, err := s.live(it.Lease, p.Now)
		if err == nil {
			kind := backend.AttemptFailed
			if it.Cancel {
				kind = backend.AttemptCancelled
			}
			j.Errors = append(j.Errors, backend.AttemptError{Attempt: j.Attempt, At: p.Now, Kind: kind, Message: it.Message, Stack: it.Stack})
			j.LeaseExpiresAt, j.WorkerID = time.Time{}, ""
			s.count(j.Queue, p.Now, true)
			switch {
			case it.Cancel:
				s.endCancelled(j, backend.CancelReasonHandler, p.Now)
			case j.CancelRequested:
				s.endCancelled(j, backend.CancelReasonRequested, p.Now)
			case it.Final || j.Attempt >= j.MaxAttempts:
				s.finish(j, backend.StateFailed, p.Now)
			case it.RetryAt.After(p.Now):
				j.State, j.RunAt = backend.StateRetry, it.RetryAt
				s.index(j)
			default:
				j.State, j.RunAt = backend.StatePending, p.Now
				s.index(j)
				s.signal(j.Queue)
			}
		}
		res.Errors = append(res.Errors, err)
	}
	return res, nil
}

// Release hands active jobs back to pending at once.
func (s *store) Release(ctx context.Context, p backend.ReleaseParams) (backend.BatchResult, error) {
	if err := s.lock(); err != nil {
		return backend.BatchResult{}, err
	}
	defer s.mu.Unlock()
	var res backend.BatchResult
	for _, l := range p.Leases {
		j, err := s.live(l, p.Now)
		if err == nil {
			j.Errors = append(j.Errors, backend.AttemptError{Attempt: j.Attempt, At: p.Now, Kind: backend.AttemptInterrupted, Message: "released"})
			j.Attempt--
			j.LeaseExpiresAt, j.WorkerID = time.Time{}, ""
			if j.CancelRequested {
				s.endCancelled(j, backend.CancelReasonRequested, p.Now)
			} else {
				j.State = backend.StatePending
				s.index(j)
				s.signal(j.Queue)
			}
		}
		res.Errors = append(res.Errors, err)
	}
	return res, nil
}

// Get returns a copy of a job, or backend.ErrNotFound.
func (s *store) Get(ctx context.Context, p backend.GetParams) (*backend.Job, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	id := p.ID
	if p.JID != "" {
		id = s.jids[p.JID]
	}
	j := s.jobs[id]
	if j == nil {
		return nil, backend.ErrNotFound
	}
	return j.Clone(), nil
}

// Delete removes a job that is not active.
func (s *store) Delete(ctx context.Context, p backend.DeleteParams) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	j := s.jobs[p.ID]
	switch {
	case j == nil:
		return backend.ErrNotFound
	case j.State == backend.StateActive:
		return backend.ErrJobActive
	}
	s.remove(p.ID)
	return nil
}

// step calls act on the jobs match picks, in claim order (before), at
// most p.Limit of them. Only the jobs picked are sorted: a step that
// finds little to do costs one pass over the jobs.
func (s *store) step(p backend.MaintenanceParams, match func(j *backend.Job) bool, act func(j *backend.Job)) {
	var js []*backend.Job
	for _, j := range s.jobs {
		if match(j) {
			js = append(js, j)
		}
	}
	slices.SortFunc(js, before)
	if p.Limit > 0 && len(js) > p.Limit {
		js = js[:p.Limit]
	}
	for _, j := range js {
		act(j)
	}
}

// Promote makes due scheduled and retry jobs pending and cancels those past their deadline.
func (s *store) Promote(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	if err := s.lock(); err != nil {
		return backend.MaintenanceResult{}, err
	}
	defer s.mu.Unlock()
	var res backend.MaintenanceResult
	match := func(j *backend.Job) bool {
		switch j.State {
		case backend.StateScheduled, backend.StatePending, backend.StateRetry:
		default:
			return false
		}
		pastDeadline := !j.Deadline.IsZero() && !p.Now.Before(j.Deadline)
		return pastDeadline || j.State != backend.StatePending && !p.Now.Before(j.RunAt)
	}
	s.step(p, match, func(j *backend.Job) {
		if s.cancelForDeadline(j, p.Now) {
			res.Cancelled++
			return
		}
		j.State = backend.StatePending
		s.index(j)
		res.Moved++
		s.signal(j.Queue)
	})
	return res, nil
}

// RecoverLeases ends expired leases.
func (s *store) RecoverLeases(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	if err := s.lock(); err != nil {
		return backend.MaintenanceResult{}, err
	}
	defer s.mu.Unlock()
	var res backend.MaintenanceResult
	match := func(j *backend.Job) bool {
		return j.State == backend.StateActive && !p.Now.Before(j.LeaseExpiresAt)
	}
	s.step(p, match, func(j *backend.Job) {
		j.Errors = append(j.Errors, backend.AttemptError{Attempt: j.Attempt, At: p.Now, Kind: backend.AttemptLeaseExpired, Message: "lease expired"})
		j.LeaseExpiresAt, j.WorkerID = time.Time{}, ""
		res.Moved++
		s.count(j.Queue, p.Now, true)
		if j.CancelRequested {
			s.endCancelled(j, backend.CancelReasonRequested, p.Now)
		} else if j.Attempt >= j.MaxAttempts {
			res.Failed++
			s.finish(j, backend.StateFailed, p.Now)
		} else {
			j.State = backend.StatePending
			s.index(j)
			s.signal(j.Queue)
		}
	})
	return res, nil
}

// ApplyRetention deletes final jobs whose retention has run out and
// forgets expired unique keys, per-minute counters and worker entries.
func (s *store) ApplyRetention(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	if err := s.lock(); err != nil {
		return backend.MaintenanceResult{}, err
	}
	defer s.mu.Unlock()
	var res backend.MaintenanceResult
	match := func(j *backend.Job) bool {
		return j.State.Final() && !j.ExpiresAt.IsZero() && !p.Now.Before(j.ExpiresAt)
	}
	s.step(p, match, func(j *backend.Job) {
		s.remove(j.ID)
		res.Moved++
	})
	for k := range s.holds {
		if s.holder(k[0], k[1], p.Now) == nil {
			delete(s.holds, k)
		}
	}
	for m := range s.minutes {
		if m.Before(backend.MinuteOf(p.Now.Add(-backend.StatsHistory))) {
			delete(s.minutes, m)
		}
	}
	for qm := range s.queueMinutes {
		if qm.minute.Before(backend.MinuteOf(p.Now.Add(-backend.QueueStatsHistory))) {
			delete(s.queueMinutes, qm)
		}
	}
	for id, w := range s.workers {
		if !p.Now.Before(w.ExpiresAt) {
			delete(s.workers, id)
		}
	}
	return res, nil
}

// Subscribe signals when a job becomes pending in one of the queues.
func (s *store) Subscribe(ctx context.Context, p backend.SubscribeParams) (*backend.Subscription, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	c := make(chan struct{}, 1)
	s.subs[c] = slices.Clone(p.Queues)
	return backend.NewSubscription(c, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.subs, c)
	}), nil
}

// Close drops every job; later calls return backend.ErrClosed. It is
// safe to call more than once.
func (s *store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	// Let the jobs go even if the caller keeps the store.
	s.jobs, s.holds, s.queues, s.workers, s.minutes = nil, nil, nil, nil, nil
	s.queueIndexes = nil
	return nil
}

// Cancel cancels a waiting job, or asks an active one to stop.
func (s *store) Cancel(ctx context.Context, p backend.CancelParams) (*backend.Job, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	j := s.jobs[p.ID]
	if j == nil {
		return nil, backend.ErrNotFound
	}
	switch j.State {
	case backend.StateScheduled, backend.StatePending, backend.StateRetry:
		j.CancelReason = backend.CancelReasonRequested
		s.finish(j, backend.StateCancelled, p.Now)
	case backend.StateActive:
		j.CancelRequested = true
	default:
		return nil, &backend.StateError{Op: "cancel", ID: j.ID, State: j.State}
	}
	return j.Clone(), nil
}

// retry sends a failed or cancelled job back to pending at now, as
// RetryParams says.
func (s *store) retry(j *backend.Job, now time.Time) error {
	if j.State != backend.StateFailed && j.State != backend.StateCancelled {
		return &backend.StateError{Op: "retry", ID: j.ID, State: j.State}
	}
	if j.UniqueKey != "" && j.UniqueFor == 0 {
		k := [2]string{j.Queue, j.UniqueKey}
		if h := s.holder(j.Queue, j.UniqueKey, now); h != nil && h.id != j.ID {
			return fmt.Errorf("retry of %s: key %q is held by %s: %w", j.ID, j.UniqueKey, h.id, backend.ErrUniqueKeyHeld)
		}
		s.holds[k] = &hold{id: j.ID, state: backend.StatePending}
	}
	j.State, j.RunAt = backend.StatePending, now
	j.MaxAttempts = max(j.MaxAttempts, j.Attempt+1)
	j.FinishedAt, j.ExpiresAt, j.Result, j.CancelReason, j.CancelRequested = time.Time{}, time.Time{}, nil, "", false
	if !j.Deadline.IsZero() && !j.Deadline.After(now) {
		j.Deadline = time.Time{}
	}
	s.index(j)
	s.signal(j.Queue)
	return nil
}

// Retry sends a failed or cancelled job back to pending.
func (s *store) Retry(ctx context.Context, p backend.RetryParams) (*backend.Job, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	j := s.jobs[p.ID]
	if j == nil {
		return nil, backend.ErrNotFound
	}
	if err := s.retry(j, p.Now); err != nil {
		return nil, err
	}
	return j.Clone(), nil
}

// RunNow makes a scheduled or retry job pending at once.
func (s *store) RunNow(ctx context.Context, p backend.RunNowParams) (*backend.Job, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	j := s.jobs[p.ID]
	if j == nil {
		return nil, backend.ErrNotFound
	}
	if j.State != backend.StateScheduled && j.State != backend.StateRetry {
		return nil, &backend.StateError{Op: "run now", ID: j.ID, State: j.State}
	}
	j.State, j.RunAt = backend.StatePending, p.Now
	s.index(j)
	s.signal(j.Queue)
	return j.Clone(), nil
}

// inQueue returns the jobs of queue in state, by id.
func (s *store) inQueue(queue string, state backend.State) []*backend.Job {
	var js []*backend.Job
	for _, j := range s.jobs {
		if j.Queue == queue && j.State == state {
			js = append(js, j)
		}
	}
	slices.SortFunc(js, func(a, b *backend.Job) int { return cmp.Compare(a.ID, b.ID) })
	return js
}

// RetryQueue retries up to Limit jobs of a queue, oldest first.
func (s *store) RetryQueue(ctx context.Context, p backend.RetryQueueParams) (backend.CountResult, error) {
	if err := s.lock(); err != nil {
		return backend.CountResult{}, err
	}
	defer s.mu.Unlock()
	var res backend.CountResult
	for _, j := range s.inQueue(p.Queue, p.State) {
		if res.Count == p.Limit {
			break
		}
		if s.retry(j, p.Now) == nil {
			res.Count++
		}
	}
	return res, nil
}

// Purge deletes up to Limit jobs of a queue in one state, oldest first.
func (s *store) Purge(ctx context.Context, p backend.PurgeParams) (backend.CountResult, error) {
	if err := s.lock(); err != nil {
		return backend.CountResult{}, err
	}
	defer s.mu.Unlock()
	var res backend.CountResult
	for _, j := range s.inQueue(p.Queue, p.State) {
		if res.Count == p.Limit {
			break
		}
		s.remove(j.ID)
		res.Count++
	}
	return res, nil
}

// Report records progress and log lines of active jobs.
func (s *store) Report(ctx context.Context, p backend.ReportParams) (backend.BatchResult, error) {
	if err := s.lock(); err != nil {
		return backend.BatchResult{}, err
	}
	defer s.mu.Unlock()
	var res backend.BatchResult
	for _, it := range p.Items {
		j, err := s.live(it.Lease, p.Now)
		if err == nil {
			if it.Progress != nil {
				pr := *it.Progress
				pr.At = p.Now
				j.Progress = &pr
			}
			for _, l := range it.Logs {
				if len(j.Logs) < p.MaxLines() {
					j.Logs = append(j.Logs, backend.LogLine{At: p.Now, Line: l})
				} else {
					j.LogsDropped++
				}
			}
		}
		res.Errors = append(res.Errors, err)
	}
	return res, nil
}

// WatchFinished signals when a named job becomes final or is deleted.
func (s *store) WatchFinished(ctx context.Context, p backend.WatchParams) (*backend.Subscription, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	c := make(chan struct{}, 1)
	s.watchers[c] = slices.Clone(p.IDs)
	return backend.NewSubscription(c, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.watchers, c)
	}), nil
}

// UpdateQueue changes a queue's settings.
func (s *store) UpdateQueue(ctx context.Context, p backend.UpdateQueueParams) (backend.QueueSettings, error) {
	if err := s.lock(); err != nil {
		return backend.QueueSettings{}, err
	}
	defer s.mu.Unlock()
	qs := s.queues[p.Queue]
	wasPaused := qs.Paused
	if p.Paused != nil {
		qs.Paused = *p.Paused
	}
	if p.Retention != nil {
		qs.Retention = *p.Retention
	}
	s.queues[p.Queue] = qs
	if wasPaused && !qs.Paused {
		for _, j := range s.jobs {
			if j.Queue == p.Queue && j.State == backend.StatePending {
				s.signal(p.Queue)
				break
			}
		}
	}
	return qs, nil
}

// List pages through jobs in id order.
func (s *store) List(ctx context.Context, p backend.ListParams) (backend.ListResult, error) {
	after := p.After()
	if err := s.lock(); err != nil {
		return backend.ListResult{}, err
	}
	defer s.mu.Unlock()
	var js []*backend.Job
	for _, j := range s.jobs {
		if !p.Matches(j) {
			continue
		}
		if after != "" && (p.Order == backend.NewestFirst && j.ID >= after || p.Order != backend.NewestFirst && j.ID <= after) {
			continue
		}
		js = append(js, j)
	}
	slices.SortFunc(js, func(a, b *backend.Job) int { return cmp.Compare(a.ID, b.ID) })
	if p.Order == backend.NewestFirst {
		slices.Reverse(js)
	}
	var res backend.ListResult
	for i, j := range js {
		if i == p.Limit {
			res.NextCursor = p.NextCursor(js[i-1].ID)
			break
		}
		c := j.Clone()
		c.Payload, c.Result, c.Logs = nil, nil, nil
		res.Jobs = append(res.Jobs, c)
	}
	return res, nil
}

// Stats counts jobs per queue and state, and attempts per minute.
func (s *store) Stats(ctx context.Context, p backend.StatsParams) (backend.Stats, error) {
	if err := s.lock(); err != nil {
		return backend.Stats{}, err
	}
	defer s.mu.Unlock()
	infos := map[string]*backend.QueueInfo{}
	info := func(q string) *backend.QueueInfo {
		if infos[q] == nil {
			infos[q] = &backend.QueueInfo{Name: q, Counts: backend.NewCounts(), Settings: s.queues[q]}
		}
		return infos[q]
	}
	for q := range s.queues {
		info(q)
	}
	for _, j := range s.jobs {
		qi := info(j.Queue)
		qi.Counts[j.State]++
		if j.State == backend.StatePending && (qi.OldestPending.IsZero() || j.RunAt.Before(qi.OldestPending)) {
			qi.OldestPending = j.RunAt
		}
	}
	for qm, c := range s.queueMinutes {
		if qi := infos[qm.queue]; qi != nil {
			qi.Add(p.Now, qm.minute, backend.AttemptCount{Processed: c[0], Failed: c[1]})
		}
	}
	st := backend.Stats{Processed: s.processed, Failed: s.failed}
	for _, qi := range infos {
		st.Queues = append(st.Queues, *qi)
	}
	slices.SortFunc(st.Queues, func(a, b backend.QueueInfo) int { return cmp.Compare(a.Name, b.Name) })
	last := backend.MinuteOf(p.Now)
	for i := p.Minutes - 1; i >= 0; i-- {
		m := backend.MinuteCount{Minute: last.Add(-time.Duration(i) * time.Minute)}
		if c := s.minutes[m.Minute]; c != nil {
			m.Processed, m.Failed = c[0], c[1]
		}
		st.Minutes = append(st.Minutes, m)
	}
	return st, nil
}

// RegisterWorker records or refreshes a worker's entry, keeping its
// command.
func (s *store) RegisterWorker(ctx context.Context, p backend.RegisterWorkerParams) (backend.RegisterWorkerResult, error) {
	if err := s.lock(); err != nil {
		return backend.RegisterWorkerResult{}, err
	}
	defer s.mu.Unlock()
	w := p.Registered()
	if old := s.workers[w.ID]; old != nil {
		w.Command = old.Command
	}
	s.workers[w.ID] = w
	return backend.RegisterWorkerResult{Command: w.Command}, nil
}

// CommandWorker records a command on a worker's entry.
func (s *store) CommandWorker(ctx context.Context, p backend.CommandWorkerParams) (backend.WorkerInfo, error) {
	if err := s.lock(); err != nil {
		return backend.WorkerInfo{}, err
	}
	defer s.mu.Unlock()
	w := s.workers[p.ID]
	if w == nil || !w.ExpiresAt.After(p.Now) {
		return backend.WorkerInfo{}, backend.ErrWorkerNotFound
	}
	w.Command = w.Command.Stronger(p.Command)
	c := w.Clone()
	c.Dead = !p.Now.Before(w.DeadAt)
	return *c, nil
}

// DeregisterWorker removes a worker's entry.
func (s *store) DeregisterWorker(ctx context.Context, p backend.DeregisterWorkerParams) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	delete(s.workers, p.ID)
	return nil
}

// Workers lists the worker entries not expired.
func (s *store) Workers(ctx context.Context, p backend.WorkersParams) ([]backend.WorkerInfo, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var ws []backend.WorkerInfo
	for _, w := range s.workers {
		if !w.ExpiresAt.After(p.Now) {
			continue
		}
		c := w.Clone()
		c.Dead = !p.Now.Before(w.DeadAt)
		ws = append(ws, *c)
	}
	slices.SortFunc(ws, func(a, b backend.WorkerInfo) int { return cmp.Compare(a.ID, b.ID) })
	return ws, nil
}

func (s *store) Lead(ctx context.Context, p backend.LeadParams) (backend.Leadership, error) {
	if err := s.lock(); err != nil {
		return backend.Leadership{}, err
	}
	defer s.mu.Unlock()
	l := backend.NextLeadership(s.leaders[p.Name], p)
	if l.Held {
		s.leaders[p.Name] = l
	}
	return l, nil
}

func (s *store) Resign(ctx context.Context, p backend.ResignParams) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if l, store := backend.ResignedLeadership(s.leaders[p.Name], p); store {
		s.leaders[p.Name] = l
	}
	return nil
}
