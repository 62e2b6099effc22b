package api

import (
	"encoding/json"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// Lease names one claim on one job.
type Lease struct {
	ID         string `json:"id"`
	LeaseToken int64  `json:"lease_token"`
}

// Backend converts the lease for the store.
func (l Lease) Backend() backend.Lease { return backend.Lease{JobID: l.ID, Token: l.LeaseToken} }

// FromLeases converts leases for the wire.
func FromLeases(ls []backend.Lease) []Lease {
	out := make([]Lease, len(ls))
	for i, l := range ls {
		out[i] = Lease{ID: l.JobID, LeaseToken: l.Token}
	}
	return out
}

// BackendLeases converts leases for the store.
func BackendLeases(ls []Lease) []backend.Lease {
	out := make([]backend.Lease, len(ls))
	for i, l := range ls {
		out[i] = l.Backend()
	}
	return out
}

// HeartbeatRequest is the body of POST /api/v1/leases/heartbeat; Extend
// defaults to 30s.
type HeartbeatRequest struct {
	Leases []Lease  `json:"leases"`
	Extend Duration `json:"extend,omitzero"`
}

// LeaseStatus is the heartbeat's answer for one lease.
type LeaseStatus struct {
	Lost            bool      `json:"lost"`
	CancelRequested bool      `json:"cancel_requested"`
	ExpiresAt       time.Time `json:"expires_at,omitzero"`
}

// HeartbeatResponse has one LeaseStatus per lease, in order.
type HeartbeatResponse struct {
	Leases []LeaseStatus `json:"leases"`
}

// CompleteItem finishes one job; Result (any JSON) or ResultB64 is stored.
type CompleteItem struct {
	Lease
	Result    json.RawMessage `json:"result,omitempty"`
	ResultB64 []byte          `json:"result_b64,omitempty"`
}

// Backend converts the item for the store. The result shares c's result.
func (c CompleteItem) Backend() backend.CompleteItem {
	return backend.CompleteItem{Lease: c.Lease.Backend(), Result: joinBytes(c.Result, c.ResultB64)}
}

// FromCompleteItem converts an item for the wire.
func FromCompleteItem(c backend.CompleteItem) CompleteItem {
	out := CompleteItem{Lease: Lease{ID: c.Lease.JobID, LeaseToken: c.Lease.Token}}
	out.Result, out.ResultB64 = splitBytes(c.Result)
	return out
}

// CompleteRequest is the body of POST /api/v1/leases/complete.
type CompleteRequest struct {
	Items []CompleteItem `json:"items"`
}

// FailItem ends one attempt with an error (see backend.FailItem).
type FailItem struct {
	Lease
	Message string    `json:"message,omitempty"`
	Stack   string    `json:"stack,omitempty"`
	RetryAt time.Time `json:"retry_at,omitzero"`
	Final   bool      `json:"final,omitempty"`
	Cancel  bool      `json:"cancel,omitempty"`
}

// Backend converts the item for the store.
func (f FailItem) Backend() backend.FailItem {
	return backend.FailItem{Lease: f.Lease.Backend(), Message: f.Message, Stack: f.Stack, RetryAt: f.RetryAt, Final: f.Final, Cancel: f.Cancel}
}

// FromFailItem converts an item for the wire.
func FromFailItem(f backend.FailItem) FailItem {
	return FailItem{Lease: Lease{ID: f.Lease.JobID, LeaseToken: f.Lease.Token}, Message: f.Message, Stack: f.Stack, RetryAt: f.RetryAt, Final: f.Final, Cancel: f.Cancel}
}

// FailRequest is the body of POST /api/v1/leases/fail.
type FailRequest struct {
	Items []FailItem `json:"items"`
}

// ReleaseRequest is the body of POST /api/v1/leases/release.
type ReleaseRequest struct {
	Leases []Lease `json:"leases"`
}

// ProgressBody is a progress report: Percent in [0, 100] and a message.
type ProgressBody struct {
	Percent float64 `json:"percent"`
	Message string  `json:"message,omitempty"`
}

// ReportItem reports progress and log lines for one job under its lease.
type ReportItem struct {
	Lease
	Progress *ProgressBody `json:"progress,omitempty"`
	Logs     []string      `json:"logs,omitempty"`
}

// Backend converts the item for the store.
func (r ReportItem) Backend() backend.ReportItem {
	it := backend.ReportItem{Lease: r.Lease.Backend(), Logs: r.Logs}
	if r.Progress != nil {
		it.Progress = &backend.Progress{Percent: r.Progress.Percent, Message: r.Progress.Message}
	}
	return it
}

// FromReportItem converts an item for the wire.
func FromReportItem(r backend.ReportItem) ReportItem {
	out := ReportItem{Lease: Lease{ID: r.Lease.JobID, LeaseToken: r.Lease.Token}, Logs: r.Logs}
	if r.Progress != nil {
		out.Progress = &ProgressBody{Percent: r.Progress.Percent, Message: r.Progress.Message}
	}
	return out
}

// ReportRequest is the body of POST /api/v1/leases/report.
type ReportRequest struct {
	Items       []ReportItem `json:"items"`
	MaxLogLines int          `json:"max_log_lines,omitempty"`
}

// ItemResult is the outcome of one item of a batch: Error is absent when
// the item was applied.
type ItemResult struct {
	OK    bool   `json:"ok"`
	Error *Error `json:"error,omitempty"`
}

// BatchResponse has one ItemResult per item, in order.
type BatchResponse struct {
	Results []ItemResult `json:"results"`
}

// OneLease is the body of the per-job lease calls (heartbeat, complete,
// fail, release, progress, log under /api/v1/jobs/{id}/): the lease token
// and, depending on the call, the fields of the batch item.
type OneLease struct {
	LeaseToken int64           `json:"lease_token"`
	Extend     Duration        `json:"extend,omitzero"`
	Result     json.RawMessage `json:"result,omitempty"`
	ResultB64  []byte          `json:"result_b64,omitempty"`
	Message    string          `json:"message,omitempty"`
	Stack      string          `json:"stack,omitempty"`
	RetryAt    time.Time       `json:"retry_at,omitzero"`
	Final      bool            `json:"final,omitempty"`
	Cancel     bool            `json:"cancel,omitempty"`
	Percent    float64         `json:"percent,omitempty"`
	Lines      []string        `json:"lines,omitempty"`
}
