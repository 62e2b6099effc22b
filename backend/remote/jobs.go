package remote

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// Enqueue sends the jobs as one array (atomic on the server). The
// contract's checks ran before it, in Checked: here too, since JSON would
// silently mend text that is not valid UTF-8 before the server could
// refuse it. The payload bound is the server's unless the caller set a
// smaller one (see MaxPayload).
func (b *httpBackend) Enqueue(ctx context.Context, p backend.EnqueueParams) (backend.EnqueueResult, error) {
	if b.closed.Load() {
		return backend.EnqueueResult{}, backend.ErrClosed
	}
	if len(p.Jobs) == 0 {
		return backend.EnqueueResult{Jobs: []backend.EnqueuedJob{}}, nil
	}
	in := make([]api.NewJob, len(p.Jobs))
	for i, j := range p.Jobs {
		in[i] = api.FromNewJob(j)
	}
	var out []api.Enqueued
	if err := b.call(ctx, "POST", "/api/v1/jobs", true, p.Now, in, &out); err != nil {
		return backend.EnqueueResult{}, err
	}
	res := backend.EnqueueResult{Jobs: make([]backend.EnqueuedJob, len(out))}
	for i, e := range out {
		res.Jobs[i] = backend.EnqueuedJob{ID: e.ID, State: e.State, Duplicate: e.Duplicate}
	}
	return res, nil
}

// Get reads a job by id or by JID. It names which in the query (by=id,
// by=jid), so that the server never takes a JID shaped like an id for one,
// nor the reverse; a server too old to know by=jid answers by id, and a
// job whose JID is not the one asked for is not found.
func (b *httpBackend) Get(ctx context.Context, p backend.GetParams) (*backend.Job, error) {
	key, by := p.ID, "?by=id"
	if p.JID != "" {
		key, by = p.JID, "?by=jid"
	}
	if key == "" {
		if b.closed.Load() {
			return nil, backend.ErrClosed
		}
		return nil, backend.ErrNotFound
	}
	var j api.Job
	if err := b.call(ctx, "GET", jobPath(key, by), false, time.Time{}, nil, &j); err != nil {
		return nil, err
	}
	if p.JID != "" && j.JID != p.JID {
		return nil, backend.ErrNotFound
	}
	return j.Backend(), nil
}

// Delete removes a job that is not active.
func (b *httpBackend) Delete(ctx context.Context, p backend.DeleteParams) error {
	if p.ID == "" {
		if b.closed.Load() {
			return backend.ErrClosed
		}
		return backend.ErrNotFound
	}
	return b.call(ctx, "DELETE", jobPath(p.ID), true, p.Now, nil, nil)
}

// jobOp posts to a job's operation and returns the job it answers.
func (b *httpBackend) jobOp(ctx context.Context, id, op string, now time.Time) (*backend.Job, error) {
	if id == "" {
		if b.closed.Load() {
			return nil, backend.ErrClosed
		}
		return nil, backend.ErrNotFound
	}
	var j api.Job
	if err := b.call(ctx, "POST", jobPath(id, "/", op), true, now, nil, &j); err != nil {
		return nil, err
	}
	return j.Backend(), nil
}

// Cancel cancels a job.
func (b *httpBackend) Cancel(ctx context.Context, p backend.CancelParams) (*backend.Job, error) {
	return b.jobOp(ctx, p.ID, "cancel", p.Now)
}

// Retry runs a failed or cancelled job again.
func (b *httpBackend) Retry(ctx context.Context, p backend.RetryParams) (*backend.Job, error) {
	return b.jobOp(ctx, p.ID, "retry", p.Now)
}

// RunNow makes a scheduled or retry job pending at once.
func (b *httpBackend) RunNow(ctx context.Context, p backend.RunNowParams) (*backend.Job, error) {
	return b.jobOp(ctx, p.ID, "run", p.Now)
}

// List pages through jobs.
func (b *httpBackend) List(ctx context.Context, p backend.ListParams) (backend.ListResult, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("queue", p.Queue)
	set("state", string(p.State))
	set("type", p.Type)
	set("tag", p.Tag)
	set("q", p.Search)
	set("order", string(p.Order))
	set("cursor", p.Cursor)
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	var out api.JobList
	if err := b.call(ctx, "GET", "/api/v1/jobs?"+q.Encode(), false, time.Time{}, nil, &out); err != nil {
		return backend.ListResult{}, err
	}
	res := backend.ListResult{Jobs: make([]*backend.Job, len(out.Jobs)), NextCursor: out.NextCursor}
	for i, j := range out.Jobs {
		res.Jobs[i] = j.Backend()
	}
	return res, nil
}
