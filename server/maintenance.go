package server

import (
	"context"
	"net/http"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// maintenanceLimit is how many jobs one maintenance step may touch; a step
// that reaches it is repeated at once.
const maintenanceLimit = 1000

// maintenanceStep is one maintenance call of the store.
type maintenanceStep struct {
	name string
	fn   func(context.Context, backend.MaintenanceParams) (backend.MaintenanceResult, error)
}

// steps lists the maintenance steps by the names the API uses.
func (s *Server) steps() []maintenanceStep {
	return []maintenanceStep{
		{"promote", s.b.Promote},
		{"recover", s.b.RecoverLeases},
		{"retention", s.b.ApplyRetention},
	}
}

// startMaintenance starts one loop per step. Several servers (or workers)
// on one shared store may run them at once: each step is safe to repeat.
func (s *Server) startMaintenance(ctx context.Context) {
	for i, st := range s.steps() {
		s.maint[i].Start(ctx, func(ctx context.Context) { s.maintenanceLoop(ctx, st) })
	}
}

// maintenanceLoop runs step every MaintenanceInterval, repeating it while
// it reports a full limit of work.
func (s *Server) maintenanceLoop(ctx context.Context, st maintenanceStep) {
	t := time.NewTicker(s.cfg.MaintenanceInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for ctx.Err() == nil {
			res, err := st.fn(ctx, backend.MaintenanceParams{Now: s.clockNow(), Limit: maintenanceLimit})
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("kyu server: maintenance failed", "step", st.name, "error", err)
				}
				break
			}
			if res.Moved+res.Cancelled > 0 {
				s.log.Debug("kyu server: maintenance", "step", st.name, "moved", res.Moved, "failed", res.Failed, "cancelled", res.Cancelled)
			}
			if res.Moved+res.Cancelled < maintenanceLimit {
				break
			}
		}
	}
}

// handleMaintenance serves POST /api/v1/maintenance/{step}: one step now,
// for operators and for backend/remote, whose callers drive maintenance
// themselves.
func (s *Server) handleMaintenance(w http.ResponseWriter, r *http.Request) {
	var step *maintenanceStep
	for _, st := range s.steps() {
		if st.name == r.PathValue("step") {
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
	res, err := step.fn(r.Context(), backend.MaintenanceParams{Now: now, Limit: req.Limit})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.MaintenanceResult(res))
}
