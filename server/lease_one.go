package server

import (
	"net/http"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// The per-job worker calls under /api/v1/jobs/{id}/: each names its lease
// by lease_token, and a stale token is 409 (lease_lost).

// readOne reads the body of a per-job lease call.
func (s *Server) readOne(w http.ResponseWriter, r *http.Request) (api.OneLease, backend.Lease, bool) {
	var req api.OneLease
	if err := decodeBody(r, &req, false); err != nil {
		s.fail(w, r, err)
		return req, backend.Lease{}, false
	}
	if req.LeaseToken <= 0 {
		s.fail(w, r, badRequest("lease_token", "the token the claim gave is required"))
		return req, backend.Lease{}, false
	}
	return req, backend.Lease{JobID: r.PathValue("id"), Token: req.LeaseToken}, true
}

// one runs a batch call for one item and answers its result: 200, or the
// item's error with its status (a validation error without the item
// index, as there is one item).
func (s *Server) one(w http.ResponseWriter, r *http.Request, op func(now time.Time) (backend.BatchResult, error)) {
	now, err := s.now(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := op(now)
	if err == nil && len(res.Errors) == 1 {
		err = res.Errors[0]
	}
	if err != nil {
		s.fail(w, r, unbatch(err))
		return
	}
	writeJSON(w, http.StatusOK, api.ItemResult{OK: true})
}

// handleOneHeartbeat serves POST /api/v1/jobs/{id}/heartbeat.
func (s *Server) handleOneHeartbeat(w http.ResponseWriter, r *http.Request) {
	req, l, ok := s.readOne(w, r)
	if !ok {
		return
	}
	res, err := s.heartbeat(r, []backend.Lease{l}, time.Duration(req.Extend))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if res.Leases[0].Lost {
		s.fail(w, r, backend.ErrLeaseLost)
		return
	}
	writeJSON(w, http.StatusOK, res.Leases[0])
}

// handleOneComplete serves POST /api/v1/jobs/{id}/complete.
func (s *Server) handleOneComplete(w http.ResponseWriter, r *http.Request) {
	req, l, ok := s.readOne(w, r)
	if !ok {
		return
	}
	item := api.CompleteItem{Lease: api.Lease{ID: l.JobID, LeaseToken: l.Token}, Result: req.Result, ResultB64: req.ResultB64}.Backend()
	s.one(w, r, func(now time.Time) (backend.BatchResult, error) {
		res, err := s.b.Complete(r.Context(), backend.CompleteParams{Items: []backend.CompleteItem{item}, Now: now})
		if err == nil && res.Errors[0] == nil {
			s.noteEnded(l.JobID, "completed", now)
		}
		return res, err
	})
}

// handleOneFail serves POST /api/v1/jobs/{id}/fail.
func (s *Server) handleOneFail(w http.ResponseWriter, r *http.Request) {
	req, l, ok := s.readOne(w, r)
	if !ok {
		return
	}
	item := backend.FailItem{Lease: l, Message: req.Message, Stack: req.Stack, RetryAt: req.RetryAt, Final: req.Final, Cancel: req.Cancel}
	s.one(w, r, func(now time.Time) (backend.BatchResult, error) {
		items := []backend.FailItem{item}
		s.applyBackoff(r.Context(), items, now)
		res, err := s.b.Fail(r.Context(), backend.FailParams{Items: items, Now: now})
		if err == nil && res.Errors[0] == nil {
			s.noteEnded(l.JobID, "failed", now)
		}
		return res, err
	})
}

// handleOneRelease serves POST /api/v1/jobs/{id}/release.
func (s *Server) handleOneRelease(w http.ResponseWriter, r *http.Request) {
	_, l, ok := s.readOne(w, r)
	if !ok {
		return
	}
	s.one(w, r, func(now time.Time) (backend.BatchResult, error) {
		res, err := s.b.Release(r.Context(), backend.ReleaseParams{Leases: []backend.Lease{l}, Now: now})
		if err == nil && res.Errors[0] == nil {
			s.noteEnded(l.JobID, "released", now)
		}
		return res, err
	})
}

// handleOneProgress serves POST /api/v1/jobs/{id}/progress.
func (s *Server) handleOneProgress(w http.ResponseWriter, r *http.Request) {
	req, l, ok := s.readOne(w, r)
	if !ok {
		return
	}
	item := backend.ReportItem{Lease: l, Progress: &backend.Progress{Percent: req.Percent, Message: req.Message}}
	s.one(w, r, func(now time.Time) (backend.BatchResult, error) {
		return s.b.Report(r.Context(), backend.ReportParams{Items: []backend.ReportItem{item}, Now: now})
	})
}

// handleOneLog serves POST /api/v1/jobs/{id}/log.
func (s *Server) handleOneLog(w http.ResponseWriter, r *http.Request) {
	req, l, ok := s.readOne(w, r)
	if !ok {
		return
	}
	if len(req.Lines) == 0 {
		s.fail(w, r, badRequest("lines", "give at least one line"))
		return
	}
	item := backend.ReportItem{Lease: l, Logs: req.Lines}
	s.one(w, r, func(now time.Time) (backend.BatchResult, error) {
		return s.b.Report(r.Context(), backend.ReportParams{Items: []backend.ReportItem{item}, Now: now})
	})
}
