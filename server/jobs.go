package server

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// handleEnqueue serves POST /api/v1/jobs: one job (an object; 201, or 409
// with the holder's id for a unique-key duplicate) or many (an array,
// written atomically; 201 with one answer per item, duplicates marked).
// An Idempotency-Key header replays the first answer to a retry.
func (s *Server) handleEnqueue(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	key := r.Header.Get(api.IdempotencyHeader)
	if key == "" {
		status, v := s.enqueue(r, body)
		writeJSON(w, status, v)
		return
	}
	if len(key) > 256 {
		s.fail(w, r, badRequest(api.IdempotencyHeader, "longer than 256 bytes"))
		return
	}
	ans, err := s.idem.do(r.Context(), key, body, s.clockNow(), func() (int, []byte) {
		status, v := s.enqueue(r, body)
		b, err := encodeJSON(v)
		if err != nil {
			return http.StatusInternalServerError, nil
		}
		return status, b
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if ans.replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(ans.status)
	w.Write(ans.body)
}

// enqueue runs one enqueue request and returns its status and answer.
func (s *Server) enqueue(r *http.Request, body []byte) (int, any) {
	now, err := s.now(r)
	if err != nil {
		return errorAnswer(err)
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	batch := len(trimmed) > 0 && trimmed[0] == '['
	p := backend.EnqueueParams{Now: now, MaxPayload: s.cfg.MaxPayload}
	if batch {
		n := batchItems(trimmed, s.cfg.MaxBatch)
		if n > s.cfg.MaxBatch {
			return errorAnswer(&api.Error{Code: api.CodeTooLarge, Message: "a batch holds at most " + itoa(int64(s.cfg.MaxBatch)) + " jobs", Field: "body"})
		}
		items := make([]api.NewJob, 0, n) // decoding appends to it
		if err := decodeJSON(body, &items, true); err != nil {
			return errorAnswer(err)
		}
		if len(items) == 0 {
			return errorAnswer(badRequest("body", "an empty array enqueues nothing"))
		}
		p.Jobs = make([]backend.NewJob, len(items))
		for i := range items {
			if p.Jobs[i], err = items[i].Backend(i, now); err != nil {
				return errorAnswer(err)
			}
		}
	} else {
		if len(trimmed) == 0 {
			return errorAnswer(badRequest("body", "a JSON body is required"))
		}
		var one api.NewJob
		if err := decodeJSON(body, &one, false); err != nil {
			return errorAnswer(err)
		}
		nj, err := one.Backend(-1, now)
		if err != nil {
			return errorAnswer(err)
		}
		p.Jobs = []backend.NewJob{nj}
	}
	res, err := s.b.Enqueue(r.Context(), p)
	if err != nil {
		if !batch {
			err = unbatch(err)
		}
		return errorAnswer(err)
	}
	for i, e := range res.Jobs {
		if !e.Duplicate {
			j := &p.Jobs[i]
			s.metrics.job(j.Queue, j.Type).enqueued.Inc()
			s.events.job(jobEvent{ID: e.ID, Change: "enqueued", Queue: queueOr(j.Queue), Type: j.Type, State: e.State})
		}
	}
	if !batch {
		e := res.Jobs[0]
		if e.Duplicate {
			return http.StatusConflict, api.ErrorBody{Error: api.Error{Code: api.CodeDuplicate, Message: "the unique key is held by job " + e.ID, ID: e.ID, State: e.State, Field: "unique_key"}}
		}
		return http.StatusCreated, api.Enqueued{ID: e.ID, State: e.State}
	}
	out := make([]api.Enqueued, len(res.Jobs))
	for i, e := range res.Jobs {
		out[i] = api.Enqueued{ID: e.ID, State: e.State, Duplicate: e.Duplicate}
	}
	return http.StatusCreated, out
}

// unbatch drops the item index of a single job's validation error.
func unbatch(err error) error {
	if ve, ok := err.(*backend.ValidationError); ok && ve.Index == 0 {
		c := *ve
		c.Index = -1
		return &c
	}
	return err
}

// errorAnswer turns err into a status and an error body.
func errorAnswer(err error) (int, any) {
	e, ok := err.(*api.Error)
	if !ok {
		e = api.FromError(err)
	}
	return statusOf(e.Code), api.ErrorBody{Error: *e}
}

// queueOr names the default queue for "".
func queueOr(q string) string {
	if q == "" {
		return backend.DefaultQueue
	}
	return q
}

// handleGet serves GET /api/v1/jobs/{id}.
func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	j, err := s.b.Get(r.Context(), backend.GetParams{ID: id})
	if errors.Is(err, backend.ErrNotFound) {
		// Not a kyu id: the job may be known by the jid its producer gave
		// it (a Faktory client's), which is unique in the store too.
		j, err = s.b.Get(r.Context(), backend.GetParams{JID: id})
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJob(w, j)
}

// handleList serves GET /api/v1/jobs.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := backend.ListParams{
		Queue: q.Get("queue"), State: backend.State(q.Get("state")), Type: q.Get("type"),
		Tag: q.Get("tag"), Search: q.Get("q"), Order: backend.ListOrder(q.Get("order")), Cursor: q.Get("cursor"),
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			s.fail(w, r, badRequest("limit", "not a number"))
			return
		}
		p.Limit = n
	}
	// The filters are checked here to learn the defaults (the cursor is
	// the store's to read): the page is read from the store in steps of at
	// most listStep jobs, and ends early once its jobs reach
	// MaxResponseBytes, with a cursor right after its last job.
	cursor := p.Cursor
	p.Cursor = ""
	if _, err := p.Check(); err != nil {
		s.fail(w, r, err)
		return
	}
	p.Cursor = cursor
	ans := jobsAnswer{budget: s.cfg.MaxResponseBytes}
	var next, last string
	for want := p.Limit; want > 0; {
		step := p
		step.Limit = min(want, listStep)
		res, err := s.b.List(r.Context(), step)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		n, err := ans.add(res.Jobs)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if n > 0 {
			last = res.Jobs[n-1].ID
		}
		if n < len(res.Jobs) {
			next = p.NextCursor(last)
			break
		}
		next, want = res.NextCursor, want-n
		// A short step (a store bounds what one call reads) ends the page
		// as it would have ended it.
		if next == "" || n < step.Limit {
			break
		}
		p.Cursor = next
	}
	ans.write(w, next, false)
}

// listStep bounds the jobs read from the store at a time for one page.
const listStep = 200

// handleWait serves GET /api/v1/jobs/{id}/wait?timeout=30s: it answers the
// job once it is final, or as it is when the timeout (at most MaxWait)
// passes, the server shuts down, or no wait slot is free.
func (s *Server) handleWait(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	timeout := 30 * time.Second
	if v := r.URL.Query().Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			s.fail(w, r, badRequest("timeout", "not a non-negative duration such as 30s"))
			return
		}
		timeout = d
	}
	timeout = min(timeout, s.cfg.MaxWait)
	ctx := r.Context()
	j, err := s.b.Get(ctx, backend.GetParams{ID: id})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if j.State.Final() || timeout == 0 || !s.acquirePoll() {
		writeJob(w, j)
		return
	}
	defer s.releasePoll()
	// A poll now and then covers a signal that a store may coalesce away;
	// a store that cannot watch is polled more often.
	every := time.Second
	var wake <-chan struct{}
	sub, err := s.b.WatchFinished(ctx, backend.WatchParams{IDs: []string{id}})
	switch {
	case errors.Is(err, backend.ErrNotSupported):
		every = 100 * time.Millisecond
	case err != nil:
		s.fail(w, r, err)
		return
	default:
		defer sub.Close()
		wake = sub.C
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	poll := time.NewTicker(every)
	defer poll.Stop()
wait:
	for {
		// Read again after subscribing: the job may have ended in between.
		j, err = s.b.Get(ctx, backend.GetParams{ID: id})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if j.State.Final() {
			break
		}
		select {
		case <-wake:
		case <-poll.C:
		case <-timer.C:
			break wait
		case <-ctx.Done():
			break wait
		case <-s.stopping:
			break wait
		}
	}
	writeJob(w, j)
}

// handleRetry serves POST /api/v1/jobs/{id}/retry.
func (s *Server) handleRetry(w http.ResponseWriter, r *http.Request) {
	s.admin(w, r, "retried", func(now time.Time) (*backend.Job, error) {
		return s.b.Retry(r.Context(), backend.RetryParams{ID: r.PathValue("id"), Now: now})
	})
}

// handleCancel serves POST /api/v1/jobs/{id}/cancel.
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	s.admin(w, r, "cancel requested", func(now time.Time) (*backend.Job, error) {
		return s.b.Cancel(r.Context(), backend.CancelParams{ID: r.PathValue("id"), Now: now})
	})
}

// handleRunNow serves POST /api/v1/jobs/{id}/run.
func (s *Server) handleRunNow(w http.ResponseWriter, r *http.Request) {
	s.admin(w, r, "run now", func(now time.Time) (*backend.Job, error) {
		return s.b.RunNow(r.Context(), backend.RunNowParams{ID: r.PathValue("id"), Now: now})
	})
}

// admin runs one operation on a job and answers the job.
func (s *Server) admin(w http.ResponseWriter, r *http.Request, change string, op func(now time.Time) (*backend.Job, error)) {
	now, err := s.now(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	j, err := op(now)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.publishJob(j, change)
	writeJob(w, j)
}

// handleDelete serves DELETE /api/v1/jobs/{id}.
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	now, err := s.now(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id := r.PathValue("id")
	if err := s.b.Delete(r.Context(), backend.DeleteParams{ID: id, Now: now}); err != nil {
		s.fail(w, r, err)
		return
	}
	s.events.job(jobEvent{ID: id, Change: "deleted"})
	w.WriteHeader(http.StatusNoContent)
}
