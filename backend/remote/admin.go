package remote

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// maintain runs one maintenance step on the server.
func (b *httpBackend) maintain(ctx context.Context, step string, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	var out api.MaintenanceResult
	if err := b.call(ctx, "POST", "/api/v1/maintenance/"+step, true, p.Now, api.MaintenanceRequest{Limit: p.Limit}, &out); err != nil {
		return backend.MaintenanceResult{}, err
	}
	return backend.MaintenanceResult(out), nil
}

// Promote runs the server's promotion step once. A server runs it by
// itself too; calling it is for tests and operators.
func (b *httpBackend) Promote(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	return b.maintain(ctx, "promote", p)
}

// RecoverLeases runs the server's lease recovery once.
func (b *httpBackend) RecoverLeases(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	return b.maintain(ctx, "recover", p)
}

// ApplyRetention runs the server's retention step once.
func (b *httpBackend) ApplyRetention(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	return b.maintain(ctx, "retention", p)
}

// queuePath is the path of a queue, or below it.
func queuePath(name, rest string) string {
	return "/api/v1/queues/" + url.PathEscape(name) + rest
}

// RetryQueue retries up to Limit jobs of a queue in one request.
func (b *httpBackend) RetryQueue(ctx context.Context, p backend.RetryQueueParams) (backend.CountResult, error) {
	return b.bulk(ctx, "POST", p.Queue, "/retry", p.State, p.Limit, p.Now)
}

// Purge deletes up to Limit jobs of a queue in one state in one request.
func (b *httpBackend) Purge(ctx context.Context, p backend.PurgeParams) (backend.CountResult, error) {
	return b.bulk(ctx, "DELETE", p.Queue, "/jobs", p.State, p.Limit, p.Now)
}

// bulk sends one checked bulk request on the jobs of a queue in one state
// (retry or purge) and reads how many it changed.
func (b *httpBackend) bulk(ctx context.Context, method, queue, rest string, state backend.State, limit int, now time.Time) (backend.CountResult, error) {
	if b.closed.Load() {
		return backend.CountResult{}, backend.ErrClosed
	}
	q := url.Values{"state": {string(state)}, "limit": {strconv.Itoa(limit)}}
	var out api.Count
	if err := b.call(ctx, method, queuePath(queue, rest+"?"+q.Encode()), true, now, nil, &out); err != nil {
		return backend.CountResult{}, err
	}
	return backend.CountResult{Count: out.Count}, nil
}

// UpdateQueue changes a queue's settings.
func (b *httpBackend) UpdateQueue(ctx context.Context, p backend.UpdateQueueParams) (backend.QueueSettings, error) {
	if b.closed.Load() {
		return backend.QueueSettings{}, backend.ErrClosed
	}
	var out backend.QueueSettings
	err := b.call(ctx, "PATCH", queuePath(p.Queue, ""), true, p.Now, api.QueueUpdate{Paused: p.Paused, Retention: p.Retention}, &out)
	return out, err
}

// Stats reads the server's statistics.
func (b *httpBackend) Stats(ctx context.Context, p backend.StatsParams) (backend.Stats, error) {
	var out api.Stats
	if err := b.call(ctx, "GET", "/api/v1/stats?minutes="+strconv.Itoa(p.Minutes), true, p.Now, nil, &out); err != nil {
		return backend.Stats{}, err
	}
	return out.Backend(), nil
}

// RegisterWorker records a worker process's entry and returns the command
// on it.
func (b *httpBackend) RegisterWorker(ctx context.Context, p backend.RegisterWorkerParams) (backend.RegisterWorkerResult, error) {
	if b.closed.Load() {
		return backend.RegisterWorkerResult{}, backend.ErrClosed
	}
	in := api.WorkerRegistration{Worker: p.Worker, DeadAfter: api.Duration(p.DeadAfter), ExpireAfter: api.Duration(p.ExpireAfter)}
	var out api.WorkerRegistered
	err := b.call(ctx, "PUT", "/api/v1/workers/"+url.PathEscape(p.Worker.ID), true, p.Now, in, &out)
	return backend.RegisterWorkerResult{Command: out.Command}, err
}

// CommandWorker records a command on a worker's entry.
func (b *httpBackend) CommandWorker(ctx context.Context, p backend.CommandWorkerParams) (backend.WorkerInfo, error) {
	if b.closed.Load() {
		return backend.WorkerInfo{}, backend.ErrClosed
	}
	var out backend.WorkerInfo
	err := b.call(ctx, "POST", "/api/v1/workers/"+url.PathEscape(p.ID)+"/"+url.PathEscape(string(p.Command)), true, p.Now, nil, &out)
	return out, err
}

// DeregisterWorker removes a worker process's entry.
func (b *httpBackend) DeregisterWorker(ctx context.Context, p backend.DeregisterWorkerParams) error {
	if p.ID == "" {
		return nil
	}
	return b.call(ctx, "DELETE", "/api/v1/workers/"+url.PathEscape(p.ID), false, time.Time{}, nil, nil)
}

// Workers lists the registry's live entries.
func (b *httpBackend) Workers(ctx context.Context, p backend.WorkersParams) ([]backend.WorkerInfo, error) {
	var out api.WorkerList
	if err := b.call(ctx, "GET", "/api/v1/workers", true, p.Now, nil, &out); err != nil {
		return nil, err
	}
	return out.Workers, nil
}
