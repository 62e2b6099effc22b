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
	// MaxBytes bounds the payload bytes of the claimed jobs as
	// backend.ClaimParams.MaxBytes does (0: only the server's bound).
	MaxBytes int `json:"max_bytes,omitempty"`
	// Types limits the claim to jobs of these types as
	// backend.ClaimParams.Types does (absent or empty: every type).
	Types []string `json:"types,omitempty"`
	Lease Duration `json:"lease,omitzero"`
	Wait  Duration `json:"wait,omitzero"`
}

// ClaimResponse lists the claimed jobs, each with its lease_token.
// Truncated says the claim stopped early for a byte bound (the server's,
// or the request's max_bytes): the jobs it stopped before are still in
// their queues, and a claim again may get them.
type ClaimResponse struct {
	Jobs      []*Job `json:"jobs"`
	Truncated bool   `json:"truncated,omitempty"`
}
