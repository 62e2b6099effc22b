package server

import (
	"context"
	"net/http"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// Defaults of the worker side.
const (
	defaultLease  = 30 * time.Second
	maxClaimBatch = 1000
	// pollEvery bounds how long a waiting claim trusts wake-ups alone.
	pollEvery = time.Second
	// claimJobFields is room left in a claim's answer, per job asked for,
	// for a job's fields beside its payload (its id, times, lease, queue
	// and type take a few hundred bytes), so that the payload bytes the
	// store claims fit in MaxResponseBytes with their jobs' fields.
	claimJobFields = 512
)

// handleClaim serves POST /api/v1/claim: it claims at once, and when
// nothing is claimable waits up to wait (at most MaxWait) for a wake-up,
// claiming again on each.
func (s *Server) handleClaim(w http.ResponseWriter, r *http.Request) {
	var req api.ClaimRequest
	if err := decodeBody(r, &req, true); err != nil {
		s.fail(w, r, err)
		return
	}
	p := backend.ClaimParams{Queues: req.Queues, Mode: req.Mode, Weights: req.Weights, Types: req.Types, WorkerID: req.Worker, Max: 1, Lease: time.Duration(req.Lease)}
	if p.Queues == nil {
		p.Queues = []string{backend.DefaultQueue}
	}
	if req.Max != nil {
		p.Max = *req.Max
	}
	if p.Max > maxClaimBatch {
		s.fail(w, r, badRequest("max", "over the limit of 1000 jobs per claim"))
		return
	}
	if req.Lease == 0 {
		p.Lease = defaultLease
	}
	if req.Wait < 0 {
		s.fail(w, r, badRequest("wait", "must not be negative"))
		return
	}
	if req.MaxBytes < 0 {
		s.fail(w, r, badRequest("max_bytes", "must not be negative"))
		return
	}
	p.MaxBytes = s.claimBudget(p.Max)
	if req.MaxBytes > 0 {
		p.MaxBytes = min(p.MaxBytes, req.MaxBytes)
	}
	wait := min(time.Duration(req.Wait), s.cfg.MaxWait)
	ctx := r.Context()
	var ans jobsAnswer
	truncated := false
	claim := func() (int, error) {
		now, err := s.now(r)
		if err != nil {
			return 0, err
		}
		p.Now = now
		res, err := s.b.Claim(ctx, p)
		if err != nil {
			return 0, err
		}
		ans = jobsAnswer{budget: s.cfg.MaxResponseBytes}
		n, err := ans.add(res.Jobs)
		if err != nil {
			n = 0
		}
		if rest := res.Jobs[n:]; len(rest) > 0 {
			// The store kept to the payload budget; what the jobs'
			// other fields (or base64 payloads) took beyond it goes back.
			s.handBack(ctx, rest, now)
			truncated = true
		}
		if res.Truncated {
			truncated = true
		}
		s.noteClaimed(res.Jobs[:n], now)
		return n, err
	}
	n, err := claim()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if n > 0 || wait <= 0 || p.Max <= 0 || len(p.Queues) == 0 || !s.acquirePoll() {
		ans.write(w, "", truncated)
		return
	}
	defer s.releasePoll()
	sub, err := s.b.Subscribe(ctx, backend.SubscribeParams{Queues: p.Queues})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer sub.Close()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	poll := time.NewTicker(pollEvery)
	defer poll.Stop()
wait:
	for {
		// Claim after subscribing too: a job may have come in between.
		if n, err = claim(); err != nil {
			s.fail(w, r, err)
			return
		}
		if n > 0 {
			break
		}
		select {
		case <-sub.C:
		case <-poll.C:
		case <-timer.C:
			break wait
		case <-ctx.Done():
			break wait
		case <-s.stopping:
			break wait
		}
	}
	ans.write(w, "", truncated)
}

// claimBudget is the payload bytes a claim of up to jobs jobs asks the
// store for: MaxResponseBytes less room for the jobs' other fields, but
// at least half of it. The store then loads about that much at most (one
// job beyond it when that job comes first), however large the payloads
// waiting.
func (s *Server) claimBudget(jobs int) int {
	b := s.cfg.MaxResponseBytes
	return max(b-max(jobs, 1)*claimJobFields, b/2, 1)
}

// handBack releases claimed jobs that do not fit in the claim's answer
// (past MaxResponseBytes), so that they go back to their queue at once
// instead of waiting out a lease no one holds. Release does not count the
// attempt; it is recorded as interrupted.
func (s *Server) handBack(ctx context.Context, jobs []*backend.Job, now time.Time) {
	leases := make([]backend.Lease, len(jobs))
	for i, j := range jobs {
		leases[i] = backend.Lease{JobID: j.ID, Token: j.LeaseToken}
	}
	res, err := s.b.Release(context.WithoutCancel(ctx), backend.ReleaseParams{Leases: leases, Now: now})
	if err == nil {
		for _, e := range res.Errors {
			if e != nil {
				err = e
			}
		}
	}
	if err != nil {
		s.log.Error("kyu server: hand back the jobs a claim's answer had no room for; they wait for their leases to expire", "jobs", len(jobs), "error", err)
	}
}

// handleHeartbeat serves POST /api/v1/leases/heartbeat.
func (s *Server) handleHeartbeat(w http.ResponseWriter, r *http.Request) {
	var req api.HeartbeatRequest
	if err := decodeBody(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.heartbeat(r, api.BackendLeases(req.Leases), time.Duration(req.Extend))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// heartbeat extends leases (by 30s when extend is 0).
func (s *Server) heartbeat(r *http.Request, leases []backend.Lease, extend time.Duration) (api.HeartbeatResponse, error) {
	now, err := s.now(r)
	if err != nil {
		return api.HeartbeatResponse{}, err
	}
	if extend == 0 {
		extend = defaultLease
	}
	res, err := s.b.Heartbeat(r.Context(), backend.HeartbeatParams{Leases: leases, Extend: extend, Now: now})
	if err != nil {
		return api.HeartbeatResponse{}, err
	}
	out := api.HeartbeatResponse{Leases: make([]api.LeaseStatus, len(res.Leases))}
	for i, l := range res.Leases {
		out.Leases[i] = api.LeaseStatus{Lost: l.Lost, CancelRequested: l.CancelRequested, ExpiresAt: l.ExpiresAt}
	}
	return out, nil
}

// handleComplete serves POST /api/v1/leases/complete.
func (s *Server) handleComplete(w http.ResponseWriter, r *http.Request) {
	var req api.CompleteRequest
	if err := decodeBody(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	items := make([]backend.CompleteItem, len(req.Items))
	for i, it := range req.Items {
		items[i] = it.Backend()
	}
	s.batch(w, r, func(now time.Time) (backend.BatchResult, error) {
		res, err := s.b.Complete(r.Context(), backend.CompleteParams{Items: items, Now: now})
		if err == nil {
			for i, it := range items {
				if res.Errors[i] == nil {
					s.noteEnded(it.Lease.JobID, "completed", now)
				}
			}
		}
		return res, err
	})
}

// handleFail serves POST /api/v1/leases/fail.
func (s *Server) handleFail(w http.ResponseWriter, r *http.Request) {
	var req api.FailRequest
	if err := decodeBody(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	items := make([]backend.FailItem, len(req.Items))
	for i, it := range req.Items {
		items[i] = it.Backend()
	}
	s.batch(w, r, func(now time.Time) (backend.BatchResult, error) {
		s.applyBackoff(r.Context(), items, now)
		res, err := s.b.Fail(r.Context(), backend.FailParams{Items: items, Now: now})
		if err == nil {
			for i, it := range items {
				if res.Errors[i] == nil {
					s.noteEnded(it.Lease.JobID, "failed", now)
				}
			}
		}
		return res, err
	})
}

// handleRelease serves POST /api/v1/leases/release.
func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request) {
	var req api.ReleaseRequest
	if err := decodeBody(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	leases := api.BackendLeases(req.Leases)
	s.batch(w, r, func(now time.Time) (backend.BatchResult, error) {
		res, err := s.b.Release(r.Context(), backend.ReleaseParams{Leases: leases, Now: now})
		if err == nil {
			for i, l := range leases {
				if res.Errors[i] == nil {
					s.noteEnded(l.JobID, "released", now)
				}
			}
		}
		return res, err
	})
}

// handleReport serves POST /api/v1/leases/report.
func (s *Server) handleReport(w http.ResponseWriter, r *http.Request) {
	var req api.ReportRequest
	if err := decodeBody(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	items := make([]backend.ReportItem, len(req.Items))
	for i, it := range req.Items {
		items[i] = it.Backend()
	}
	s.batch(w, r, func(now time.Time) (backend.BatchResult, error) {
		return s.b.Report(r.Context(), backend.ReportParams{Items: items, MaxLogLines: req.MaxLogLines, Now: now})
	})
}

// batch runs one batch call and answers its per-item results.
func (s *Server) batch(w http.ResponseWriter, r *http.Request, op func(now time.Time) (backend.BatchResult, error)) {
	now, err := s.now(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := op(now)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, batchResponse(res))
}

// batchResponse converts per-item errors for the wire.
func batchResponse(res backend.BatchResult) api.BatchResponse {
	out := api.BatchResponse{Results: make([]api.ItemResult, len(res.Errors))}
	for i, err := range res.Errors {
		if err == nil {
			out.Results[i] = api.ItemResult{OK: true}
		} else {
			out.Results[i] = api.ItemResult{Error: api.FromError(err)}
		}
	}
	return out
}
