package remote

import (
	"context"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// Claim leases jobs without waiting: a Worker waits on Subscribe. When
// the server stops an answer early to keep it within its byte bound (it
// claims no more payload bytes than fit, and hands back the jobs whose
// other fields did not), Claim claims again for the rest, asking each
// time for no more jobs than the last answer held, so that few are
// claimed only to be handed back. With MaxBytes the server keeps that
// bound too (as max_bytes), and one answer is the claim: a second
// request could not tell whether its first job still fits, so Claim
// reports Truncated instead and the caller claims again.
func (b *httpBackend) Claim(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	res := backend.ClaimResult{Jobs: []*backend.Job{}}
	for want := p.Max; ; {
		step := p
		step.Max = want
		got, truncated, err := b.claimOnce(ctx, step)
		if err != nil {
			if len(res.Jobs) > 0 {
				// The jobs claimed already are leased: hand them out.
				return res, nil
			}
			return backend.ClaimResult{}, err
		}
		res.Jobs = append(res.Jobs, got...)
		if p.MaxBytes > 0 {
			res.Truncated = truncated
			return res, nil
		}
		// Done when all are claimed, or when an answer that was not cut
		// short was the first or held fewer than asked: nothing is left.
		if len(got) == 0 || len(res.Jobs) >= p.Max || !truncated && (want == p.Max || len(got) < want) {
			return res, nil
		}
		want = min(len(got), p.Max-len(res.Jobs))
	}
}

// claimOnce sends one claim and says whether the server stopped early.
func (b *httpBackend) claimOnce(ctx context.Context, p backend.ClaimParams) ([]*backend.Job, bool, error) {
	if b.closed.Load() {
		return nil, false, backend.ErrClosed
	}
	// Checked already refused what the API would mend with a default (a
	// zero lease).
	if p.MaxBytes < 0 {
		p.MaxBytes = 0 // no bound, as 0
	}
	queues := p.Queues
	if queues == nil {
		queues = []string{}
	}
	max := p.Max
	in := api.ClaimRequest{MaxBytes: p.MaxBytes, Types: p.Types, Queues: queues, Mode: p.Mode, Weights: p.Weights, Worker: p.WorkerID, Max: &max, Lease: api.Duration(p.Lease)}
	var out api.ClaimResponse
	if err := b.call(ctx, "POST", "/api/v1/claim", true, p.Now, in, &out); err != nil {
		return nil, false, err
	}
	jobs := make([]*backend.Job, len(out.Jobs))
	for i, j := range out.Jobs {
		jobs[i] = j.Backend()
	}
	return jobs, out.Truncated, nil
}

// Heartbeat extends leases in one request.
func (b *httpBackend) Heartbeat(ctx context.Context, p backend.HeartbeatParams) (backend.HeartbeatResult, error) {
	if b.closed.Load() {
		return backend.HeartbeatResult{}, backend.ErrClosed
	}
	in := api.HeartbeatRequest{Leases: api.FromLeases(p.Leases), Extend: api.Duration(p.Extend)}
	var out api.HeartbeatResponse
	if err := b.call(ctx, "POST", "/api/v1/leases/heartbeat", true, p.Now, in, &out); err != nil {
		return backend.HeartbeatResult{}, err
	}
	res := backend.HeartbeatResult{Leases: make([]backend.LeaseStatus, len(out.Leases))}
	for i, l := range out.Leases {
		res.Leases[i] = backend.LeaseStatus{Lost: l.Lost, CancelRequested: l.CancelRequested, ExpiresAt: l.ExpiresAt}
	}
	return res, nil
}

// Complete finishes jobs in one request.
func (b *httpBackend) Complete(ctx context.Context, p backend.CompleteParams) (backend.BatchResult, error) {
	in := api.CompleteRequest{Items: make([]api.CompleteItem, len(p.Items))}
	for i, it := range p.Items {
		in.Items[i] = api.FromCompleteItem(it)
	}
	return b.batch(ctx, "/api/v1/leases/complete", p.Now, in, len(p.Items))
}

// Fail ends attempts in one request.
func (b *httpBackend) Fail(ctx context.Context, p backend.FailParams) (backend.BatchResult, error) {
	if b.closed.Load() {
		return backend.BatchResult{}, backend.ErrClosed
	}
	in := api.FailRequest{Items: make([]api.FailItem, len(p.Items))}
	for i, it := range p.Items {
		if it.RetryAt.IsZero() {
			// The contract makes a zero RetryAt "at once"; the server gives
			// an item without retry_at its backoff, so send Now instead.
			it.RetryAt = p.Now
		}
		in.Items[i] = api.FromFailItem(it)
	}
	return b.batch(ctx, "/api/v1/leases/fail", p.Now, in, len(p.Items))
}

// Release hands jobs back in one request.
func (b *httpBackend) Release(ctx context.Context, p backend.ReleaseParams) (backend.BatchResult, error) {
	return b.batch(ctx, "/api/v1/leases/release", p.Now, api.ReleaseRequest{Leases: api.FromLeases(p.Leases)}, len(p.Leases))
}

// Report records progress and log lines in one request.
func (b *httpBackend) Report(ctx context.Context, p backend.ReportParams) (backend.BatchResult, error) {
	if b.closed.Load() {
		return backend.BatchResult{}, backend.ErrClosed
	}
	in := api.ReportRequest{Items: make([]api.ReportItem, len(p.Items)), MaxLogLines: p.MaxLogLines}
	for i, it := range p.Items {
		in.Items[i] = api.FromReportItem(it)
	}
	return b.batch(ctx, "/api/v1/leases/report", p.Now, in, len(p.Items))
}

// batch posts a batch call and returns its per-item errors.
func (b *httpBackend) batch(ctx context.Context, path string, now time.Time, in any, n int) (backend.BatchResult, error) {
	var out api.BatchResponse
	if err := b.call(ctx, "POST", path, true, now, in, &out); err != nil {
		return backend.BatchResult{}, err
	}
	return itemErrors(out.Results, n)
}
