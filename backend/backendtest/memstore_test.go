package backendtest_test

import (
	"cmp"
	"context"
	"fmt"
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
	mu       sync.Mutex
	closed   bool
	jobs     map[string]*backend.Job
	holds    map[[2]string]*hold
	subs     map[chan struct{}][]string
	watchers map[chan struct{}][]string // job ids watched by each WatchFinished
	queues   map[string]backend.QueueSettings
	workers  map[string]*backend.WorkerInfo
	// minutes counts ended attempts per minute: [processed, failed].
	minutes           map[time.Time]*[2]int64
	processed, failed int64
	// leaders holds the Leader leases by name.
	leaders map[string]backend.Leadership
}

func newMemStore() *memStore {
	return &memStore{
		jobs:     map[string]*backend.Job{},
		holds:    map[[2]string]*hold{},
		subs:     map[chan struct{}][]string{},
		watchers: map[chan struct{}][]string{},
		queues:   map[string]backend.QueueSettings{},
		workers:  map[string]*backend.WorkerInfo{},
		minutes:  map[time.Time]*[2]int64{},
		leaders:  map[string]backend.Leadership{},
	}
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

// finish moves j to a final state at now and applies backend.Expiry:
// delete it at once, or set its ExpiresAt.
func (s *memStore) finish(j *backend.Job, state backend.State, now time.Time) {
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
func (s *memStore) remove(id string) {
	delete(s.jobs, id)
	s.signalFinished(id)
}

// signalFinished wakes every WatchFinished subscription naming id.
func (s *memStore) signalFinished(id string) {
	for c, ids := range s.watchers {
		if slices.Contains(ids, id) {
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}
}

// count adds one ended attempt to the minute of now and the totals.
func (s *memStore) count(now time.Time, failed bool) {
	m := backend.MinuteOf(now)
	c := s.minutes[m]
	if c == nil {
		c = &[2]int64{}
		s.minutes[m] = c
	}
	c[0]++
	s.processed++
	if failed {
		c[1]++
		s.failed++
	}
}

// endCancelled ends the attempt of a job whose cancel was requested.
func (s *memStore) endCancelled(j *backend.Job, reason string, now time.Time) {
	j.CancelReason = reason
	s.finish(j, backend.StateCancelled, now)
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
		if s.queues[j.Queue].Paused {
			continue
		}
		due := (j.State == backend.StateScheduled || j.State == backend.StateRetry) && !j.RunAt.After(p.Now) && slices.Contains(p.Queues, j.Queue)
		if due && !s.cancelForDeadline(j, p.Now) {
			j.State = backend.StatePending
		}
		if len(p.Types) > 0 && !slices.Contains(p.Types, j.Type) {
			continue // not claimable by this claim: left as it is
		}
		if j.State == backend.StatePending && slices.Contains(p.Queues, j.Queue) && !s.cancelForDeadline(j, p.Now) {
			ready[j.Queue] = append(ready[j.Queue], j)
		}
	}
	for _, js := range ready {
		slices.SortFunc(js, before)
	}
	var res backend.ClaimResult
	used := 0
	for len(res.Jobs) < p.Max {
		q := pick(p, ready)
		if q == "" {
			break
		}
		j := ready[q][0]
		if p.MaxBytes > 0 && len(res.Jobs) > 0 && used+len(j.Payload) > p.MaxBytes {
			res.Truncated = true
			break
		}
		used += len(j.Payload)
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
		res.Leases = append(res.Leases, backend.LeaseStatus{ExpiresAt: j.LeaseExpiresAt, CancelRequested: j.CancelRequested})
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
			s.count(p.Now, false)
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
			kind := backend.AttemptFailed
			if it.Cancel {
				kind = backend.AttemptCancelled
			}
			j.Errors = append(j.Errors, backend.AttemptError{Attempt: j.Attempt, At: p.Now, Kind: kind, Message: it.Message, Stack: it.Stack})
			j.LeaseExpiresAt, j.WorkerID = time.Time{}, ""
			s.count(p.Now, true)
			switch {
			case it.Cancel:
				s.endCancelled(j, backend.CancelReasonHandler, p.Now)
			case j.CancelRequested:
				s.endCancelled(j, backend.CancelReasonRequested, p.Now)
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
			j.LeaseExpiresAt, j.WorkerID = time.Time{}, ""
			if j.CancelRequested {
				s.endCancelled(j, backend.CancelReasonRequested, p.Now)
			} else {
				j.State = backend.StatePending
				s.signal(j.Queue)
			}
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
	s.remove(p.ID)
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
		s.count(p.Now, true)
		if j.CancelRequested {
			s.endCancelled(j, backend.CancelReasonRequested, p.Now)
		} else if j.Attempt >= j.MaxAttempts {
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
		if j.State.Final() && !j.ExpiresAt.IsZero() && !p.Now.Before(j.ExpiresAt) {
			s.remove(j.ID)
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
	for m := range s.minutes {
		if m.Before(backend.MinuteOf(p.Now.Add(-backend.StatsHistory))) {
			delete(s.minutes, m)
		}
	}
	for id, w := range s.workers {
		if !p.Now.Before(w.ExpiresAt) {
			delete(s.workers, id)
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

func (s *memStore) Cancel(ctx context.Context, p backend.CancelParams) (*backend.Job, error) {
	if err := backend.CheckNow(p.Now); err != nil {
		return nil, err
	}
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
func (s *memStore) retry(j *backend.Job, now time.Time) error {
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
	s.signal(j.Queue)
	return nil
}

func (s *memStore) Retry(ctx context.Context, p backend.RetryParams) (*backend.Job, error) {
	if err := backend.CheckNow(p.Now); err != nil {
		return nil, err
	}
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

func (s *memStore) RunNow(ctx context.Context, p backend.RunNowParams) (*backend.Job, error) {
	if err := backend.CheckNow(p.Now); err != nil {
		return nil, err
	}
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
	s.signal(j.Queue)
	return j.Clone(), nil
}

// inQueue returns the jobs of queue in state, by id.
func (s *memStore) inQueue(queue string, state backend.State) []*backend.Job {
	var js []*backend.Job
	for _, j := range s.jobs {
		if j.Queue == queue && j.State == state {
			js = append(js, j)
		}
	}
	slices.SortFunc(js, func(a, b *backend.Job) int { return cmp.Compare(a.ID, b.ID) })
	return js
}

func (s *memStore) RetryQueue(ctx context.Context, p backend.RetryQueueParams) (backend.CountResult, error) {
	if err := p.Check(); err != nil {
		return backend.CountResult{}, err
	}
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

func (s *memStore) Purge(ctx context.Context, p backend.PurgeParams) (backend.CountResult, error) {
	if err := p.Check(); err != nil {
		return backend.CountResult{}, err
	}
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

func (s *memStore) Report(ctx context.Context, p backend.ReportParams) (backend.BatchResult, error) {
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

func (s *memStore) WatchFinished(ctx context.Context, p backend.WatchParams) (*backend.Subscription, error) {
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

func (s *memStore) UpdateQueue(ctx context.Context, p backend.UpdateQueueParams) (backend.QueueSettings, error) {
	if err := p.Check(); err != nil {
		return backend.QueueSettings{}, err
	}
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

func (s *memStore) List(ctx context.Context, p backend.ListParams) (backend.ListResult, error) {
	after, err := p.Check()
	if err != nil {
		return backend.ListResult{}, err
	}
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

func (s *memStore) Stats(ctx context.Context, p backend.StatsParams) (backend.Stats, error) {
	if err := p.Check(); err != nil {
		return backend.Stats{}, err
	}
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

func (s *memStore) RegisterWorker(ctx context.Context, p backend.RegisterWorkerParams) error {
	if err := p.Check(); err != nil {
		return err
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.workers[p.Worker.ID] = p.Registered()
	return nil
}

func (s *memStore) DeregisterWorker(ctx context.Context, p backend.DeregisterWorkerParams) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	delete(s.workers, p.ID)
	return nil
}

func (s *memStore) Workers(ctx context.Context, p backend.WorkersParams) ([]backend.WorkerInfo, error) {
	if err := backend.CheckNow(p.Now); err != nil {
		return nil, err
	}
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

func (s *memStore) Lead(ctx context.Context, p backend.LeadParams) (backend.Leadership, error) {
	if err := p.Check(); err != nil {
		return backend.Leadership{}, err
	}
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

func (s *memStore) Resign(ctx context.Context, p backend.ResignParams) error {
	if err := p.Check(); err != nil {
		return err
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if l, store := backend.ResignedLeadership(s.leaders[p.Name], p); store {
		s.leaders[p.Name] = l
	}
	return nil
}
