package server

import (
	"net/http"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// handleImport writes jobs with their history (POST /api/v1/jobs/import),
// for kyu import and kyu copy into a store behind a server.
func (s *Server) handleImport(w http.ResponseWriter, r *http.Request) {
	var req api.ImportRequest
	if err := decodeBody(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	now, err := s.now(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.b.Import(r.Context(), backend.ImportParams{Jobs: req.BackendJobs(), Now: now})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.ImportAnswer{Items: res.Items})
}
