package redis

import (
	"context"

	"github.com/kyuhq/kyu/backend"
)

// Import is not offered yet: a Redis job id carries its queue's number
// (ids.go), so a job from another store, whose id does not, could not be
// found by its id here. It returns backend.ErrNotSupported.
func (s *store) Import(ctx context.Context, p backend.ImportParams) (backend.ImportResult, error) {
	return backend.ImportResult{}, backend.ErrNotSupported
}
