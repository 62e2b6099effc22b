package backendtest_test

import (
	"context"

	"github.com/kyuhq/kyu/backend"
)

// The lifecycle operations of the reference store, being built.

// Cancel is not implemented yet.
func (s *memStore) Cancel(ctx context.Context, p backend.CancelParams) (*backend.Job, error) {
	return nil, backend.ErrNotSupported
}

// Retry is not implemented yet.
func (s *memStore) Retry(ctx context.Context, p backend.RetryParams) (*backend.Job, error) {
	return nil, backend.ErrNotSupported
}

// RunNow is not implemented yet.
func (s *memStore) RunNow(ctx context.Context, p backend.RunNowParams) (*backend.Job, error) {
	return nil, backend.ErrNotSupported
}

// RetryQueue is not implemented yet.
func (s *memStore) RetryQueue(ctx context.Context, p backend.RetryQueueParams) (backend.CountResult, error) {
	return backend.CountResult{}, backend.ErrNotSupported
}

// Purge is not implemented yet.
func (s *memStore) Purge(ctx context.Context, p backend.PurgeParams) (backend.CountResult, error) {
	return backend.CountResult{}, backend.ErrNotSupported
}

// Report is not implemented yet.
func (s *memStore) Report(ctx context.Context, p backend.ReportParams) (backend.BatchResult, error) {
	return backend.BatchResult{}, backend.ErrNotSupported
}

// WatchFinished is not implemented yet.
func (s *memStore) WatchFinished(ctx context.Context, p backend.WatchParams) (*backend.Subscription, error) {
	return nil, backend.ErrNotSupported
}

// UpdateQueue is not implemented yet.
func (s *memStore) UpdateQueue(ctx context.Context, p backend.UpdateQueueParams) (backend.QueueSettings, error) {
	return backend.QueueSettings{}, backend.ErrNotSupported
}

// List is not implemented yet.
func (s *memStore) List(ctx context.Context, p backend.ListParams) (backend.ListResult, error) {
	return backend.ListResult{}, backend.ErrNotSupported
}

// Stats is not implemented yet.
func (s *memStore) Stats(ctx context.Context, p backend.StatsParams) (backend.Stats, error) {
	return backend.Stats{}, backend.ErrNotSupported
}

// RegisterWorker is not implemented yet.
func (s *memStore) RegisterWorker(ctx context.Context, p backend.RegisterWorkerParams) error {
	return backend.ErrNotSupported
}

// DeregisterWorker is not implemented yet.
func (s *memStore) DeregisterWorker(ctx context.Context, p backend.DeregisterWorkerParams) error {
	return backend.ErrNotSupported
}

// Workers is not implemented yet.
func (s *memStore) Workers(ctx context.Context, p backend.WorkersParams) ([]backend.WorkerInfo, error) {
	return nil, backend.ErrNotSupported
}
