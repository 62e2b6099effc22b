package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// keepAliveEvery is how often an idle stream sends a comment line, so
// proxies and clients see it is alive.
const keepAliveEvery = 15 * time.Second

// event is one server-sent event; Kind is its SSE event name and the one
// non-empty pointer its data.
type event struct {
	Kind   string       `json:"-"`
	Job    *jobEvent    `json:"job,omitempty"`
	Queue  *queueEvent  `json:"queue,omitempty"`
	Queues []api.Queue  `json:"queues,omitempty"`
	Worker *workerEvent `json:"worker,omitempty"`
}

// jobEvent is a change of a job seen through this server: Change is
// enqueued, claimed, completed, failed, released, cancel requested,
// retried, run now or deleted; State is the job's state when the server
// knows it.
type jobEvent struct {
	ID     string        `json:"id"`
	Change string        `json:"change,omitempty"`
	Queue  string        `json:"queue,omitempty"`
	Type   string        `json:"type,omitempty"`
	State  backend.State `json:"state,omitempty"`
}

// queueEvent is a change of a queue's settings.
type queueEvent struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused"`
}

// workerEvent is a worker process joining or leaving the registry.
type workerEvent struct {
	Change string `json:"change"` // joined or left
	ID     string `json:"id"`
	Host   string `json:"host,omitempty"`
}

// hub fans events out to the open streams. A stream that falls behind
// loses events (its buffer is bounded) rather than slowing the server.
type hub struct {
	mu   sync.Mutex
	subs map[chan event]struct{}
}

func newHub() *hub { return &hub{subs: make(map[chan event]struct{})} }

// subscribe opens a stream's channel; the returned func closes it.
func (h *hub) subscribe() (<-chan event, func()) {
	c := make(chan event, 256)
	h.mu.Lock()
	h.subs[c] = struct{}{}
	h.mu.Unlock()
	return c, func() {
		h.mu.Lock()
		delete(h.subs, c)
		h.mu.Unlock()
	}
}

// listeners counts the open streams.
func (h *hub) listeners() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// publish sends e to every stream that has room for it.
func (h *hub) publish(e event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.subs {
		select {
		case c <- e:
		default:
		}
	}
}

// publishJob reports a job after an admin operation, with its state.
func (s *Server) publishJob(j *backend.Job, change string) {
	s.events.publish(event{Kind: "job", Job: &jobEvent{ID: j.ID, Change: change, Queue: j.Queue, Type: j.Type, State: j.State}})
}

// handleEvents serves GET /api/v1/events as server-sent events: "job"
// (changes seen through this server), "queue" (settings changed),
// "queues" (counts per queue and state, every EventInterval) and
// "worker" (a worker process joined or left the registry).
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok || !s.acquirePoll() {
		writeError(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeUnavailable, Message: "too many open streams; try again later"})
		return
	}
	defer s.releasePoll()
	events, stop := s.events.subscribe()
	defer stop()
	startStream(w)
	fmt.Fprint(w, ": kyu events\n\n")
	flusher.Flush()
	keep := time.NewTicker(keepAliveEvery)
	defer keep.Stop()
	for {
		select {
		case e := <-events:
			b, err := encodeJSON(e)
			if err != nil {
				continue
			}
			fmt.Fprintf(w, "event: %s\ndata: %s\n", e.Kind, b)
		case <-keep.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		case <-r.Context().Done():
			return
		case <-s.stopping:
			return
		}
		flusher.Flush()
	}
}

// startStream sends the headers of an event stream.
func startStream(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

// tickEvents publishes queue counts and worker joins and leaves every
// EventInterval while a stream is open, and forgets stale claims.
func (s *Server) tickEvents(ctx context.Context) {
	t := time.NewTicker(s.cfg.EventInterval)
	defer t.Stop()
	known := map[string]bool{}
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := s.clockNow()
		s.forgetClaims(now)
		if s.events.listeners() == 0 {
			continue
		}
		if st, err := s.b.Stats(ctx, backend.StatsParams{Now: now}); err == nil {
			s.events.publish(event{Kind: "queues", Queues: api.FromStats(st).Queues})
		}
		ws, err := s.b.Workers(ctx, backend.WorkersParams{Now: now})
		if err != nil {
			continue
		}
		seen := make(map[string]bool, len(ws))
		for _, wi := range ws {
			seen[wi.ID] = true
			if !known[wi.ID] && !first {
				s.events.publish(event{Kind: "worker", Worker: &workerEvent{Change: "joined", ID: wi.ID, Host: wi.Host}})
			}
		}
		for id := range known {
			if !seen[id] {
				s.events.publish(event{Kind: "worker", Worker: &workerEvent{Change: "left", ID: id}})
			}
		}
		known, first = seen, false
	}
}
