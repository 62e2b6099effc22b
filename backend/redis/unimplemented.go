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

