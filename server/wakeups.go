package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// handleWakeups serves GET /api/v1/wakeups as server-sent events: with
// ?queue=a&queue=b (or no parameter: every queue) a "wake" event whenever
// a job may have become claimable in those queues (backend Subscribe);
// with ?job=id&job=id2 a "wake" event whenever one of those jobs may have
// finished (backend WatchFinished). A "ready" event comes first, once the
// subscription is in place: every change after it is heard. This is what
// backend/remote's Subscribe and WatchFinished read.
func (s *Server) handleWakeups(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	queues, jobs := q["queue"], q["job"]
	if len(queues) > 0 && len(jobs) > 0 {
		s.fail(w, r, badRequest("job", "name queues or jobs, not both"))
		return
	}
	for _, name := range queues {
		if !backend.ValidQueueName(name) {
			s.fail(w, r, badRequest("queue", fmt.Sprintf("%q is not 1-128 characters of [A-Za-z0-9._:-]", name)))
			return
		}
	}
	flusher, ok := w.(http.Flusher)
	if !ok || !s.acquirePoll() {
		writeError(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeUnavailable, Message: "too many open streams; try again later"})
		return
	}
	defer s.releasePoll()
	var sub *backend.Subscription
	var err error
	if len(jobs) > 0 {
		sub, err = s.b.WatchFinished(r.Context(), backend.WatchParams{IDs: jobs})
	} else {
		sub, err = s.b.Subscribe(r.Context(), backend.SubscribeParams{Queues: queues})
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer sub.Close()
	startStream(w)
	fmt.Fprint(w, "event: ready\ndata: {}\n\n")
	flusher.Flush()
	keep := time.NewTicker(keepAliveEvery)
	defer keep.Stop()
	for {
		select {
		case _, open := <-sub.C:
			if !open {
				return
			}
			fmt.Fprint(w, "event: wake\ndata: {}\n\n")
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
