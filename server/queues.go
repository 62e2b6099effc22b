package server

import (
	"net/http"
	"strconv"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// handleQueues serves GET /api/v1/queues, from the store's statistics.
func (s *Server) handleQueues(w http.ResponseWriter, r *http.Request) {
	now, err := s.now(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	st, err := s.b.Stats(r.Context(), backend.StatsParams{Now: now})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.QueueList{Queues: api.FromStats(st).Queues})
}

// handleUpdateQueue serves PATCH /api/v1/queues/{name}.
func (s *Server) handleUpdateQueue(w http.ResponseWriter, r *http.Request) {
	var req api.QueueUpdate
	if err := decodeBody(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	s.updateQueue(w, r, backend.UpdateQueueParams{Paused: req.Paused, Retention: req.Retention})
}

// handlePause serves POST /api/v1/queues/{name}/pause.
func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	paused := true
	s.updateQueue(w, r, backend.UpdateQueueParams{Paused: &paused})
}

// handleResume serves POST /api/v1/queues/{name}/resume.
func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) {
	paused := false
	s.updateQueue(w, r, backend.UpdateQueueParams{Paused: &paused})
}

// updateQueue applies p to the queue named in the path.
func (s *Server) updateQueue(w http.ResponseWriter, r *http.Request, p backend.UpdateQueueParams) {
	now, err := s.now(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p.Queue, p.Now = r.PathValue("name"), now
	set, err := s.b.UpdateQueue(r.Context(), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.events.publish(event{Kind: "queue", Queue: &queueEvent{Name: p.Queue, Paused: set.Paused}})
	writeJSON(w, http.StatusOK, set)
}

// bulkParams reads the state and limit of a bulk queue call. Without a
// limit the call repeats in steps of backend.MaxBatchLimit until done.
func bulkParams(r *http.Request, defState backend.State) (state backend.State, limit int, all bool, err error) {
	q := r.URL.Query()
	state = backend.State(q.Get("state"))
	if state == "" {
		state = defState
	}
	if state == "" {
		return "", 0, false, badRequest("state", "name the state of the jobs")
	}
	v := q.Get("limit")
	if v == "" {
		return state, backend.MaxBatchLimit, true, nil
	}
	limit, cerr := strconv.Atoi(v)
	if cerr != nil {
		return "", 0, false, badRequest("limit", "not a number")
	}
	return state, limit, false, nil
}

// handlePurge serves DELETE /api/v1/queues/{name}/jobs?state=&limit=.
func (s *Server) handlePurge(w http.ResponseWriter, r *http.Request) {
	s.bulk(w, r, "", func(p backend.PurgeParams) (backend.CountResult, error) { return s.b.Purge(r.Context(), p) })
}

// handleRetryQueue serves POST /api/v1/queues/{name}/retry?state=&limit=.
func (s *Server) handleRetryQueue(w http.ResponseWriter, r *http.Request) {
	s.bulk(w, r, backend.StateFailed, func(p backend.PurgeParams) (backend.CountResult, error) {
		return s.b.RetryQueue(r.Context(), backend.RetryQueueParams(p))
	})
}

// bulk runs a bulk queue operation once (with a limit) or to the end.
func (s *Server) bulk(w http.ResponseWriter, r *http.Request, defState backend.State, op func(backend.PurgeParams) (backend.CountResult, error)) {
	now, err := s.now(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	state, limit, all, err := bulkParams(r, defState)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p := backend.PurgeParams{Queue: r.PathValue("name"), State: state, Limit: limit, Now: now}
	total := 0
	for {
		res, err := op(p)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		total += res.Count
		if !all || res.Count < limit || r.Context().Err() != nil {
			break
		}
	}
	writeJSON(w, http.StatusOK, api.Count{Count: total})
}
