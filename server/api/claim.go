package api

import "github.com/kyuhq/kyu/backend"

// ClaimRequest is the body of POST /api/v1/claim. Absent fields take
// defaults: queues ["default"], max 1, lease 30s, wait 0 (answer at once).
type ClaimRequest struct {
	Queues  []string          `json:"queues"`
	Mode    backend.ClaimMode `json:"mode,omitempty"`
	Weights map[string]int    `json:"weights,omitempty"`
	Worker  string            `json:"worker,omitempty"`
	Max     *int              `json:"max,omitempty"`
	Lease   Duration          `json:"lease,omitzero"`
	Wait    Duration          `json:"wait,omitzero"`
}

// ClaimResponse lists the claimed jobs, each with its lease_token.
// Truncated says the server stopped early to keep the answer within its
// byte bound: it handed the jobs that did not fit back to their queues,
// and a claim again may get them.
type ClaimResponse struct {
	Jobs      []*Job `json:"jobs"`
	Truncated bool   `json:"truncated,omitempty"`
}
