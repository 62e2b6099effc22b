package api

import "github.com/kyuhq/kyu/backend"

// Bulk actions of POST /api/v1/jobs/bulk.
const (
	BulkRetry  = "retry"
	BulkCancel = "cancel"
	BulkDelete = "delete"
)

// BulkFilter selects jobs with the filters of GET /api/v1/jobs; an empty
// filter selects every job.
type BulkFilter struct {
	State backend.State `json:"state,omitempty"`
	Queue string        `json:"queue,omitempty"`
	Type  string        `json:"type,omitempty"`
	Tag   string        `json:"tag,omitempty"`
	Q     string        `json:"q,omitempty"`
}

// BulkRequest is the body of POST /api/v1/jobs/bulk: an action on the
// jobs matching Filter, oldest first, at most Limit of them. DryRun only
// counts them.
type BulkRequest struct {
	Filter BulkFilter `json:"filter"`
	Action string     `json:"action"`
	Limit  int        `json:"limit,omitempty"`
	DryRun bool       `json:"dry_run,omitempty"`
}

// BulkResult answers a bulk action: Matched jobs were selected (at most
// the limit), More says more matched beyond it, Done counts the jobs the
// action changed and Errors lists the first refusals (a job in a state
// the action does not apply to, say).
type BulkResult struct {
	Matched int         `json:"matched"`
	More    bool        `json:"more"`
	Done    int         `json:"done"`
	Errors  []BulkError `json:"errors,omitempty"`
}

// BulkError is one job's refusal in a bulk action.
type BulkError struct {
	ID      string `json:"id"`
	Code    string `json:"code"`
	Message string `json:"message"`
}
