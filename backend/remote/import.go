package remote

import (
	"context"
	"fmt"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// Import sends the jobs in one POST /api/v1/jobs/import; the server's
// store decides each outcome.
func (b *httpBackend) Import(ctx context.Context, p backend.ImportParams) (backend.ImportResult, error) {
	if b.closed.Load() {
		return backend.ImportResult{}, backend.ErrClosed
	}
	if len(p.Jobs) == 0 {
		return backend.ImportResult{Items: []backend.ImportItem{}}, nil
	}
	in := api.ImportRequest{Jobs: api.FromJobs(p.Jobs)}
	var out api.ImportAnswer
	if err := b.call(ctx, "POST", "/api/v1/jobs/import", true, p.Now, in, &out); err != nil {
		return backend.ImportResult{}, err
	}
	if len(out.Items) != len(p.Jobs) {
		return backend.ImportResult{}, fmt.Errorf("remote: import of %d jobs: the server answered %d items", len(p.Jobs), len(out.Items))
	}
	return backend.ImportResult{Items: out.Items}, nil
}
