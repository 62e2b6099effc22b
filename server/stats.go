package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// handleStats serves GET /api/v1/stats?minutes=N.
func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	now, err := s.now(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p := backend.StatsParams{Now: now}
	if v := r.URL.Query().Get("minutes"); v != "" {
		if p.Minutes, err = strconv.Atoi(v); err != nil {
			s.fail(w, r, badRequest("minutes", "not a number"))
			return
		}
	}
	st, err := s.b.Stats(r.Context(), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.FromStats(st))
}

// handleWorkers serves GET /api/v1/workers.
func (s *Server) handleWorkers(w http.ResponseWriter, r *http.Request) {
	now, err := s.now(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ws, err := s.b.Workers(r.Context(), backend.WorkersParams{Now: now})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if ws == nil {
		ws = []backend.WorkerInfo{}
	}
	writeJSON(w, http.StatusOK, api.WorkerList{Workers: ws})
}

// handleRegisterWorker serves PUT /api/v1/workers/{id}.
func (s *Server) handleRegisterWorker(w http.ResponseWriter, r *http.Request) {
	var req api.WorkerRegistration
	if err := decodeBody(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	now, err := s.now(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Worker.ID == "" {
		req.Worker.ID = r.PathValue("id")
	}
	if req.Worker.ID != r.PathValue("id") {
		s.fail(w, r, badRequest("worker.id", "differs from the id in the path"))
		return
	}
	res, err := s.b.RegisterWorker(r.Context(), backend.RegisterWorkerParams{
		Worker: req.Worker, DeadAfter: time.Duration(req.DeadAfter), ExpireAfter: time.Duration(req.ExpireAfter), Now: now,
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.WorkerRegistered{Command: res.Command})
}

// handleQuietWorker serves POST /api/v1/workers/{id}/quiet.
func (s *Server) handleQuietWorker(w http.ResponseWriter, r *http.Request) {
	s.commandWorker(w, r, backend.CommandQuiet)
}

// handleStopWorker serves POST /api/v1/workers/{id}/stop.
func (s *Server) handleStopWorker(w http.ResponseWriter, r *http.Request) {
	s.commandWorker(w, r, backend.CommandStop)
}

// commandWorker records cmd for the worker in the path and answers its
// entry.
func (s *Server) commandWorker(w http.ResponseWriter, r *http.Request, cmd backend.WorkerCommand) {
	now, err := s.now(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	info, err := s.b.CommandWorker(r.Context(), backend.CommandWorkerParams{ID: r.PathValue("id"), Command: cmd, Now: now})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// handlePeriodic serves GET /api/v1/periodic: the schedules of the live
// workers, deduplicated by name.
func (s *Server) handlePeriodic(w http.ResponseWriter, r *http.Request) {
	now, err := s.now(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ws, err := s.b.Workers(r.Context(), backend.WorkersParams{Now: now})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.PeriodicList{Periodic: PeriodicOf(ws)})
}

// handleDeregisterWorker serves DELETE /api/v1/workers/{id}.
func (s *Server) handleDeregisterWorker(w http.ResponseWriter, r *http.Request) {
	if err := s.b.DeregisterWorker(r.Context(), backend.DeregisterWorkerParams{ID: r.PathValue("id")}); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
