package server

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/internal/maintenance"
	"github.com/kyuhq/kyu/server/api"
)

// startMaintenance starts the server's maintainer: the servers and
// workers sharing the store elect one of them to run maintenance.
func (s *Server) startMaintenance(ctx context.Context) {
	host, _ := os.Hostname()
	host = strings.ToValidUTF8(host[:min(len(host), 100)], "") // within backend.LeaderNameLimit
	m := &maintenance.Maintainer{
		Backend:  s.b,
		Holder:   fmt.Sprintf("kyu-server-%s-%d-%s", host, os.Getpid(), rand.Text()[:8]),
		Interval: s.cfg.MaintenanceInterval,
		Now:      s.clockNow,
		Log:      s.log,
	}
	s.maint.Start(ctx, m.Run)
}

// handleMaintenance serves POST /api/v1/maintenance/{step}: one step now,
// whoever maintains the store, for operators and for callers of
// backend/remote's steps.
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
