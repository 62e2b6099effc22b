package server_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// lifecycleFake is an IN-TEST FAKE, for the HTTP mapping of the lifecycle
// operations only: the embedded store of this branch answers them with
// ErrNotSupported until they land. It wraps the real store and gives
// canned answers (and records what it was asked), so these tests prove
// what the server sends and how it maps errors, nothing about the store.
// The behaviour itself is proven by the conformance suite over
// backend/remote.
type lifecycleFake struct {
	backend.Backend
	mu     sync.Mutex
	listed backend.ListParams
	purges []backend.PurgeParams
}

func (f *lifecycleFake) Cancel(_ context.Context, p backend.CancelParams) (*backend.Job, error) {
	if p.ID == "finished" {
		return nil, &backend.StateError{Op: "cancel", ID: p.ID, State: backend.StateCompleted}
	}
	return &backend.Job{ID: p.ID, Type: "t", Queue: "q", State: backend.StateCancelled, CancelReason: backend.CancelReasonRequested, FinishedAt: p.Now}, nil
}

func (f *lifecycleFake) Retry(_ context.Context, p backend.RetryParams) (*backend.Job, error) {
	return nil, fmt.Errorf("retry %s: %w", p.ID, backend.ErrUniqueKeyHeld)
}

func (f *lifecycleFake) RunNow(context.Context, backend.RunNowParams) (*backend.Job, error) {
	return nil, backend.ErrNotSupported
}

func (f *lifecycleFake) List(_ context.Context, p backend.ListParams) (backend.ListResult, error) {
	f.mu.Lock()
	f.listed = p
	f.mu.Unlock()
	return backend.ListResult{Jobs: []*backend.Job{{ID: "j1", Type: "t", Queue: p.Queue, State: p.State, Tags: []string{"x"}}}, NextCursor: "next"}, nil
}

func (f *lifecycleFake) Stats(_ context.Context, p backend.StatsParams) (backend.Stats, error) {
	counts := backend.NewCounts()
	counts[backend.StatePending] = 3
	return backend.Stats{
		Queues:    []backend.QueueInfo{{Name: "q", Counts: counts, Settings: backend.QueueSettings{Paused: true}, OldestPending: p.Now.Add(-time.Minute)}},
		Minutes:   []backend.MinuteCount{{Minute: backend.MinuteOf(p.Now), Processed: 5, Failed: 1}},
		Processed: 5, Failed: 1,
	}, nil
}

func (f *lifecycleFake) Workers(_ context.Context, p backend.WorkersParams) ([]backend.WorkerInfo, error) {
	return []backend.WorkerInfo{{ID: "w1", Host: "h", PID: 7, Queues: []string{"q"}, LastSeen: p.Now}}, nil
}

func (f *lifecycleFake) UpdateQueue(_ context.Context, p backend.UpdateQueueParams) (backend.QueueSettings, error) {
	if err := p.Check(); err != nil {
		return backend.QueueSettings{}, err
	}
	return backend.QueueSettings{Paused: p.Paused != nil && *p.Paused}, nil
}

func (f *lifecycleFake) Purge(_ context.Context, p backend.PurgeParams) (backend.CountResult, error) {
	if err := p.Check(); err != nil {
		return backend.CountResult{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.purges = append(f.purges, p)
	if len(f.purges) == 1 {
		return backend.CountResult{Count: p.Limit}, nil
	}
	return backend.CountResult{Count: 2}, nil
}

func TestLifecycleHTTPMapping(t *testing.T) {
	t.Parallel()
	fake := &lifecycleFake{Backend: openStore(t)}
	e := newEnvOver(t, fake, nil)

	r := e.req("POST", "/api/v1/jobs/abc/cancel", nil)
	var j struct{ ID, State string }
	r.decode(t, &j)
	if r.status != 200 || j.ID != "abc" || j.State != "cancelled" {
		t.Errorf("cancel: %d %s", r.status, r.body)
	}
	r = e.req("POST", "/api/v1/jobs/finished/cancel", nil)
	var se struct {
		Error struct{ Code, State, Op, ID string }
	}
	r.decode(t, &se)
	if r.status != 409 || se.Error.Code != "wrong_state" || se.Error.State != "completed" || se.Error.Op != "cancel" || se.Error.ID != "finished" {
		t.Errorf("cancel of a finished job: %d %s; want 409 wrong_state naming its state", r.status, r.body)
	}
	if r = e.req("POST", "/api/v1/jobs/abc/retry", nil); r.status != 409 || r.errCode(t) != "unique_key_held" {
		t.Errorf("retry with the key held: %d %s; want 409 unique_key_held", r.status, r.body)
	}
	if r = e.req("POST", "/api/v1/jobs/abc/run", nil); r.status != 501 || r.errCode(t) != "not_implemented" {
		t.Errorf("run now unsupported: %d %s; want 501", r.status, r.body)
	}

	r = e.req("GET", "/api/v1/jobs?queue=q&state=failed&type=t&q=find&limit=7&cursor=c0&order=newest", nil)
	var list struct {
		Jobs       []struct{ ID string }
		NextCursor string `json:"next_cursor"`
	}
	r.decode(t, &list)
	want := backend.ListParams{Queue: "q", State: backend.StateFailed, Type: "t", Search: "find", Limit: 7, Cursor: "c0", Order: backend.NewestFirst}
	if r.status != 200 || len(list.Jobs) != 1 || list.NextCursor != "next" || fake.listed != want {
		t.Errorf("list: %d %s, store asked %+v; want %+v", r.status, r.body, fake.listed, want)
	}
	if r = e.req("GET", "/api/v1/jobs?limit=many", nil); r.status != 400 {
		t.Errorf("list with a bad limit: %d", r.status)
	}

	r = e.req("GET", "/api/v1/queues", nil)
	var qs struct {
		Queues []struct {
			Name   string
			Paused bool
			Counts map[string]int
		}
	}
	r.decode(t, &qs)
	if r.status != 200 || len(qs.Queues) != 1 || !qs.Queues[0].Paused || qs.Queues[0].Counts["pending"] != 3 {
		t.Errorf("queues: %d %s", r.status, r.body)
	}
	if r = e.req("GET", "/api/v1/stats?minutes=5", nil); r.status != 200 {
		t.Errorf("stats: %d %s", r.status, r.body)
	}
	if r = e.req("GET", "/api/v1/workers", nil); r.status != 200 {
		t.Errorf("workers: %d %s", r.status, r.body)
	}
	r = e.req("POST", "/api/v1/queues/q/pause", nil)
	var set struct{ Paused bool }
	r.decode(t, &set)
	if r.status != 200 || !set.Paused {
		t.Errorf("pause: %d %s", r.status, r.body)
	}
	if r = e.req("POST", "/api/v1/queues/bad%20name/resume", nil); r.status != 400 {
		t.Errorf("resume of an illegal queue name: %d %s; want 400", r.status, r.body)
	}

	// Without a limit, purge repeats until a step comes back short.
	r = e.req("DELETE", "/api/v1/queues/q/jobs?state=completed", nil)
	var n struct{ Count int }
	r.decode(t, &n)
	if r.status != 200 || n.Count != backend.MaxBatchLimit+2 || len(fake.purges) != 2 {
		t.Errorf("purge: %d %s after %d steps; want %d in 2 steps", r.status, r.body, len(fake.purges), backend.MaxBatchLimit+2)
	}
	if r = e.req("DELETE", "/api/v1/queues/q/jobs?state=active", nil); r.status != http.StatusBadRequest {
		t.Errorf("purge of active jobs: %d %s; want 400", r.status, r.body)
	}
}
