package server

import (
	"context"
	"net/http"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/internal/maintenance"
	"github.com/kyuhq/kyu/server/api"
)

// startMaintenance starts one loop per step. Several servers (or workers)
// on one shared store may run them at once: each step is safe to repeat.
func (s *Server) startMaintenance(ctx context.Context) {
	for i, st := range maintenance.Steps(s.b) {
		s.maint[i].Start(ctx, func(ctx context.Context) {
			maintenance.Loop(ctx, st, s.cfg.MaintenanceInterval, s.clockNow, s.log)
		})
	}
}

// handleMaintenance serves POST /api/v1/maintenance/{step}: one step now,
// for operators and for backend/remote, whose callers drive maintenance
// themselves.
func (s *Server) handleMaintenance(w http.ResponseWriter, r *http.Request) {
	var step *maintenance.Step
	for _, st := range maintenance.Steps(s.b) {
		if st.Name == r.PathValue("step") {
			step = &st
		}
	}
	if step == nil {
		s.fail(w, r, &api.Error{Code: api.CodeNotFound, Message: "no maintenance step " + r.PathValue("step") + " (promote, recover, retention)"})
		return
	}
	var req api.MaintenanceRequest
	if err := decodeBody(r, &req, true); err != nil {
		s.fail(w, r, err)
		return
	}
	now, err := s.now(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := step.Run(r.Context(), backend.MaintenanceParams{Now: now, Limit: req.Limit})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.MaintenanceResult(res))
}
