package api

import "github.com/kyuhq/kyu/backend"

// ImportRequest is the body of POST /api/v1/jobs/import: whole jobs, as
// GET /api/v1/jobs/{id} answers them, to write with their history (see
// backend.Importer); at most backend.MaxImportBatch.
type ImportRequest struct {
	Jobs []*Job `json:"jobs"`
}

// ImportAnswer has one item per job of the request, in order.
type ImportAnswer struct {
	Items []backend.ImportItem `json:"items"`
}

// BackendJobs converts the request's jobs for the store.
func (r *ImportRequest) BackendJobs() []*backend.Job {
	out := make([]*backend.Job, len(r.Jobs))
	for i, j := range r.Jobs {
		if j != nil {
			out[i] = j.Backend()
		}
	}
	return out
}
