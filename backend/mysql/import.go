package mysql

import (
	"context"
	"fmt"

	"github.com/kyuhq/kyu/backend"
)

// Import is not yet supported by the MySQL store: it answers an error
// matching backend.ErrNotSupported, so kyu import and kyu copy cannot yet
// write into MySQL (they can read from it, through List).
func (s *store) Import(ctx context.Context, p backend.ImportParams) (backend.ImportResult, error) {
	return backend.ImportResult{}, fmt.Errorf("kyu/mysql: import: %w", backend.ErrNotSupported)
}
