package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// health is the body of /healthz and /readyz.
type health struct {
	Status string `json:"status"`
}

// handleHealth serves GET /healthz: the process answers.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, health{Status: "ok"})
}

// handleReady serves GET /readyz: the backend answers a read (a lookup of
// an id no job has) within 2 seconds, and the server is not shutting down.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	select {
	case <-s.stopping:
		writeError(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeUnavailable, Message: "shutting down"})
		return
	default:
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	_, err := s.b.Get(ctx, backend.GetParams{ID: "00000000-0000-0000-0000-000000000000"})
	if err != nil && !errors.Is(err, backend.ErrNotFound) {
		writeError(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeUnavailable, Message: "the backend does not answer: " + err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, health{Status: "ready"})
}
