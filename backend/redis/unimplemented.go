package redis

import (
	"context"

	"github.com/kyuhq/kyu/backend"
)

// The lifecycle operations below are being built; until then they say so.

// Cancel is not implemented yet.
func (s *Store) Cancel(ctx context.Context, p backend.CancelParams) (*backend.Job, error) {
	return nil, backend.ErrNotSupported
}

// Retry is not implemented yet.
func (s *Store) Retry(ctx context.Context, p backend.RetryParams) (*backend.Job, error) {
	return nil, backend.ErrNotSupported
}

// RunNow is not implemented yet.
func (s *Store) RunNow(ctx context.Context, p backend.RunNowParams) (*backend.Job, error) {
	return nil, backend.ErrNotSupported
}

// RetryQueue is not implemented yet.
func (s *Store) RetryQueue(ctx context.Context, p backend.RetryQueueParams) (backend.CountResult, error) {
	return backend.CountResult{}, backend.ErrNotSupported
}

// Purge is not implemented yet.
func (s *Store) Purge(ctx context.Context, p backend.PurgeParams) (backend.CountResult, error) {
	return backend.CountResult{}, backend.ErrNotSupported
}

// Report is not implemented yet.
func (s *Store) Report(ctx context.Context, p backend.ReportParams) (backend.BatchResult, error) {
	return backend.BatchResult{}, backend.ErrNotSupported
}

// WatchFinished is not implemented yet.
func (s *Store) WatchFinished(ctx context.Context, p backend.WatchParams) (*backend.Subscription, error) {
	return nil, backend.ErrNotSupported
}

// UpdateQueue is not implemented yet.
func (s *Store) UpdateQueue(ctx context.Context, p backend.UpdateQueueParams) (backend.QueueSettings, error) {
	return backend.QueueSettings{}, backend.ErrNotSupported
}

// List is not implemented yet.
func (s *Store) List(ctx context.Context, p backend.ListParams) (backend.ListResult, error) {
	return backend.ListResult{}, backend.ErrNotSupported
}

// Stats is not implemented yet.
func (s *Store) Stats(ctx context.Context, p backend.StatsParams) (backend.Stats, error) {
	return backend.Stats{}, backend.ErrNotSupported
}

// RegisterWorker is not implemented yet.
func (s *Store) RegisterWorker(ctx context.Context, p backend.RegisterWorkerParams) error {
	return backend.ErrNotSupported
}

// DeregisterWorker is not implemented yet.
func (s *Store) DeregisterWorker(ctx context.Context, p backend.DeregisterWorkerParams) error {
	return backend.ErrNotSupported
}

// Workers is not implemented yet.
func (s *Store) Workers(ctx context.Context, p backend.WorkersParams) ([]backend.WorkerInfo, error) {
	return nil, backend.ErrNotSupported
}
