package redis

import (
	"context"

	"github.com/kyuhq/kyu/backend"
)

// The operations below are being built; until then they say so.

// WatchFinished is not implemented yet.
func (s *Store) WatchFinished(ctx context.Context, p backend.WatchParams) (*backend.Subscription, error) {
	return nil, backend.ErrNotSupported
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
