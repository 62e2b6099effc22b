package backendtest_test

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/backendtest"
)

// TestReference runs the suite against memStore, a plain reading of the
// settled semantics kept beside the suite to check the suite itself: if a
// real store fails where memStore passes, compare the two against the doc.
func TestReference(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backend.Backend {
		s := newMemStore()
		t.Cleanup(func() { s.Close() })
		return s
	})
}

type hold struct {
	id    string
	until time.Time // zero: held while the job exists and is not final
	state backend.State
}

type memStore struct {
	mu     sync.Mutex
	closed bool
	jobs   map[string]*backend.Job
	holds  map[[2]string]*hold
	subs   map[chan struct{}][]string
}

func newMemStore() *memStore {
	return &memStore{jobs: map[string]*backend.Job{}, holds: map[[2]string]*hold{}, subs: map[chan struct{}][]string{}}
}

var _ backend.Backend = (*memStore)(nil)

func (s *memStore) lock() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return backend.ErrClosed
	}
	return nil
}

// holder returns the job holding (queue, key) at now, if any.
func (s *memStore) holder(queue, key string, now time.Time) *hold {
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

func (s *memStore) signal(queue string) {
	for c, qs := range s.subs {
		if len(qs) == 0 || slices.Contains(qs, queue) {
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}
}

func (s *memStore) Enqueue(ctx context.Context, p backend.EnqueueParams) (backend.EnqueueResult, error) {
	if err := p.Prepare(); err != nil {
		return backend.EnqueueResult{}, err
	}
	if err := s.lock(); err != nil {
		return backend.EnqueueResult{}, err
	}
	defer s.mu.Unlock()
	var res backend.EnqueueResult
	for _, nj := range p.Jobs {
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
		if nj.UniqueKey != "" {
			h := &hold{id: id, state: j.State}
			if nj.UniqueFor > 0 {
				h.until = p.Now.Add(nj.UniqueFor)
			}
			s.holds[[2]string{nj.Queue, nj.UniqueKey}] = h
		}
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

// finish moves j to a final state at now, deleting it under RetainNone.
func (s *memStore) finish(j *backend.Job, state backend.State, now time.Time) {
	j.State, j.FinishedAt = state, now
	if j.Retention == backend.RetainNone {
		delete(s.jobs, j.ID)
	}
}

func (s *memStore) cancelForDeadline(j *backend.Job, now time.Time) bool {
	if j.Deadline.IsZero() || now.Before(j.Deadline) {
		return false
	}
	j.CancelReason = backend.CancelReasonDeadline
	s.finish(j, backend.StateCancelled, now)
	return true
}

func (s *memStore) Claim(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	if err := p.Check(); err != nil {
		return backend.ClaimResult{}, err
	}
	if err := s.lock(); err != nil {
		return backend.ClaimResult{}, err
	}
	defer s.mu.Unlock()
	ready := map[string][]*backend.Job{}
	for _, j := range s.jobs {
		due := (j.State == backend.StateScheduled || j.State == backend.StateRetry) && !j.RunAt.After(p.Now) && slices.Contains(p.Queues, j.Queue)
		if due && !s.cancelForDeadline(j, p.Now) {
			j.State = backend.StatePending
		}
		if j.State == backend.StatePending && slices.Contains(p.Queues, j.Queue) && !s.cancelForDeadline(j, p.Now) {
			ready[j.Queue] = append(ready[j.Queue], j)
		}
	}
	for _, js := range ready {
		slices.SortFunc(js, before)
	}
	var res backend.ClaimResult
	for len(res.Jobs) < p.Max {
		q := pick(p, ready)
		if q == "" {
			break
		}
		j := ready[q][0]
		ready[q] = ready[q][1:]
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

func pick(p backend.ClaimParams, ready map[string][]*backend.Job) string {
	if p.Mode != backend.ClaimWeighted {
		for _, q := range p.Queues {
			if len(ready[q]) > 0 {
				return q
			}
		}
		return ""
	}
	total := 0
	weight := func(q string) int {
		if len(ready[q]) == 0 {
			return 0
		}
		if w, ok := p.Weights[q]; ok {
			return w
		}
		return 1
	}
	for _, q := range p.Queues {
		total += weight(q)
	}
	if total == 0 {
		return ""
	}
	n := rand.IntN(total)
	for _, q := range p.Queues {
		if n -= weight(q); n < 0 {
			return q
		}
	}
	return ""
}

// live returns the job a lease names if the lease is live at now.
func (s *memStore) live(l backend.Lease, now time.Time) (*backend.Job, error) {
	j := s.jobs[l.JobID]
	if j == nil {
		return nil, backend.ErrNotFound
	}
	if j.State != backend.StateActive || j.LeaseToken != l.Token || !now.Before(j.LeaseExpiresAt) {
		return nil, backend.ErrLeaseLost
	}
	return j, nil
}

func (s *memStore) Heartbeat(ctx context.Context, p backend.HeartbeatParams) (backend.HeartbeatResult, error) {
	if err := p.Check(); err != nil {
		return backend.HeartbeatResult{}, err
	}
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
		res.Leases = append(res.Leases, backend.LeaseStatus{ExpiresAt: j.LeaseExpiresAt})
	}
	return res, nil
}

func (s *memStore) Complete(ctx context.Context, p backend.CompleteParams) (backend.BatchResult, error) {
	if err := s.lock(); err != nil {
		return backend.BatchResult{}, err
	}
	defer s.mu.Unlock()
	var res backend.BatchResult
	for _, it := range p.Items {
		j, err := s.live(it.Lease, p.Now)
		if err == nil {
			j.Result = slices.Clone(it.Result)
			j.LeaseExpiresAt, j.WorkerID = time.Time{}, ""
			s.finish(j, backend.StateCompleted, p.Now)
		}
		res.Errors = append(res.Errors, err)
	}
	return res, nil
}

func (s *memStore) Fail(ctx context.Context, p backend.FailParams) (backend.BatchResult, error) {
	if err := p.Check(); err != nil {
		return backend.BatchResult{}, err
	}
	if err := s.lock(); err != nil {
		return backend.BatchResult{}, err
	}
	defer s.mu.Unlock()
	var res backend.BatchResult
	for _, it := range p.Items {
		j, err := s.live(it.Lease, p.Now)
		if err == nil {
			j.Errors = append(j.Errors, backend.AttemptError{Attempt: j.Attempt, At: p.Now, Kind: backend.AttemptFailed, Message: it.Message, Stack: it.Stack})
			j.LeaseExpiresAt, j.WorkerID = time.Time{}, ""
			switch {
			case it.Final || j.Attempt >= j.MaxAttempts:
				s.finish(j, backend.StateFailed, p.Now)
			case it.RetryAt.After(p.Now):
				j.State, j.RunAt = backend.StateRetry, it.RetryAt
			default:
				j.State, j.RunAt = backend.StatePending, p.Now
				s.signal(j.Queue)
			}
		}
		res.Errors = append(res.Errors, err)
	}
	return res, nil
}

func (s *memStore) Release(ctx context.Context, p backend.ReleaseParams) (backend.BatchResult, error) {
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
			j.State, j.LeaseExpiresAt, j.WorkerID = backend.StatePending, time.Time{}, ""
			s.signal(j.Queue)
		}
		res.Errors = append(res.Errors, err)
	}
	return res, nil
}

func (s *memStore) Get(ctx context.Context, p backend.GetParams) (*backend.Job, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	j := s.jobs[p.ID]
	if j == nil {
		return nil, backend.ErrNotFound
	}
	return j.Clone(), nil
}

func (s *memStore) Delete(ctx context.Context, p backend.DeleteParams) error {
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
	delete(s.jobs, p.ID)
	return nil
}

// step visits the jobs in order, at most limit of which fn may act on.
func (s *memStore) step(p backend.MaintenanceParams, fn func(j *backend.Job) bool) {
	all := make([]*backend.Job, 0, len(s.jobs))
	for _, j := range s.jobs {
		all = append(all, j)
	}
	slices.SortFunc(all, before)
	n := 0
	for _, j := range all {
		if p.Limit > 0 && n >= p.Limit {
			return
		}
		if fn(j) {
			n++
		}
	}
}

func (s *memStore) Promote(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	if err := s.lock(); err != nil {
		return backend.MaintenanceResult{}, err
	}
	defer s.mu.Unlock()
	var res backend.MaintenanceResult
	s.step(p, func(j *backend.Job) bool {
		switch j.State {
		case backend.StateScheduled, backend.StatePending, backend.StateRetry:
		default:
			return false
		}
		if s.cancelForDeadline(j, p.Now) {
			res.Cancelled++
			return true
		}
		if j.State != backend.StatePending && !p.Now.Before(j.RunAt) {
			j.State = backend.StatePending
			res.Moved++
			s.signal(j.Queue)
			return true
		}
		return false
	})
	return res, nil
}

func (s *memStore) RecoverLeases(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	if err := s.lock(); err != nil {
		return backend.MaintenanceResult{}, err
	}
	defer s.mu.Unlock()
	var res backend.MaintenanceResult
	s.step(p, func(j *backend.Job) bool {
		if j.State != backend.StateActive || p.Now.Before(j.LeaseExpiresAt) {
			return false
		}
		j.Errors = append(j.Errors, backend.AttemptError{Attempt: j.Attempt, At: p.Now, Kind: backend.AttemptLeaseExpired, Message: "lease expired"})
		j.LeaseExpiresAt, j.WorkerID = time.Time{}, ""
		res.Moved++
		if j.Attempt >= j.MaxAttempts {
			res.Failed++
			s.finish(j, backend.StateFailed, p.Now)
		} else {
			j.State = backend.StatePending
			s.signal(j.Queue)
		}
		return true
	})
	return res, nil
}

func (s *memStore) ApplyRetention(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	if err := s.lock(); err != nil {
		return backend.MaintenanceResult{}, err
	}
	defer s.mu.Unlock()
	var res backend.MaintenanceResult
	s.step(p, func(j *backend.Job) bool {
		if at, ok := j.DeleteAt(); ok && !p.Now.Before(at) {
			delete(s.jobs, j.ID)
			res.Moved++
			return true
		}
		return false
	})
	for k := range s.holds {
		if s.holder(k[0], k[1], p.Now) == nil {
			delete(s.holds, k)
		}
	}
	return res, nil
}

func (s *memStore) Subscribe(ctx context.Context, p backend.SubscribeParams) (*backend.Subscription, error) {
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

func (s *memStore) Capabilities() backend.Capabilities { return backend.Capabilities{Notify: true} }

func (s *memStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}
