package server

import (
	"net/http"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// Limits of POST /api/v1/jobs/bulk.
const (
	// DefaultBulkLimit is the jobs a bulk action touches when its request
	// names no limit.
	DefaultBulkLimit = 1000
	// MaxBulkLimit bounds the limit of a bulk action.
	MaxBulkLimit = 10000
	// maxBulkErrors bounds the refusals a bulk answer lists.
	maxBulkErrors = 100
)

// handleBulk serves POST /api/v1/jobs/bulk: it lists the jobs matching
// the filter (oldest first, up to the limit), then retries, cancels or
// deletes each one as the single-job endpoints do, so every store
// supports it. A dry run only counts. Jobs enqueued while it runs may or
// may not be included; each job is acted on at most once.
func (s *Server) handleBulk(w http.ResponseWriter, r *http.Request) {
	var req api.BulkRequest
	if err := decodeBody(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	now, err := s.now(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	op, err := s.bulkOp(r, req.Action)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit := req.Limit
	switch {
	case limit == 0:
		limit = DefaultBulkLimit
	case limit < 0 || limit > MaxBulkLimit:
		s.fail(w, r, badRequest("limit", "outside [1, "+itoa(MaxBulkLimit)+"]"))
		return
	}
	f := req.Filter
	p := backend.ListParams{Queue: f.Queue, State: f.State, Type: f.Type, Tag: f.Tag, Search: f.Q, Order: backend.OldestFirst, Limit: listStep}
	if _, err := p.Check(); err != nil {
		s.fail(w, r, err)
		return
	}
	ids, more, err := s.matchingIDs(r, p, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res := api.BulkResult{Matched: len(ids), More: more}
	if req.DryRun {
		writeJSON(w, http.StatusOK, res)
		return
	}
	for _, id := range ids {
		if r.Context().Err() != nil {
			break
		}
		if err := op(id, now); err != nil {
			if len(res.Errors) < maxBulkErrors {
				e := api.FromError(err)
				res.Errors = append(res.Errors, api.BulkError{ID: id, Code: e.Code, Message: e.Message})
			}
			continue
		}
		res.Done++
	}
	writeJSON(w, http.StatusOK, res)
}

// matchingIDs lists the ids of up to limit jobs matching p, and whether
// more match.
func (s *Server) matchingIDs(r *http.Request, p backend.ListParams, limit int) ([]string, bool, error) {
	var ids []string
	for {
		res, err := s.b.List(r.Context(), p)
		if err != nil {
			return nil, false, err
		}
		for _, j := range res.Jobs {
			if len(ids) == limit {
				return ids, true, nil
			}
			ids = append(ids, j.ID)
		}
		if res.NextCursor == "" {
			return ids, false, nil
		}
		if err := r.Context().Err(); err != nil {
			return nil, false, err
		}
		p.Cursor = res.NextCursor
	}
}

// bulkOp is the single-job operation of a bulk action, publishing each
// change as the single-job endpoints do.
func (s *Server) bulkOp(r *http.Request, action string) (func(id string, now time.Time) error, error) {
	ctx := r.Context()
	switch action {
	case api.BulkRetry:
		return func(id string, now time.Time) error {
			j, err := s.b.Retry(ctx, backend.RetryParams{ID: id, Now: now})
			if err == nil {
				s.publishJob(j, "retried")
			}
			return err
		}, nil
	case api.BulkCancel:
		return func(id string, now time.Time) error {
			j, err := s.b.Cancel(ctx, backend.CancelParams{ID: id, Now: now})
			if err == nil {
				s.publishJob(j, "cancel requested")
			}
			return err
		}, nil
	case api.BulkDelete:
		return func(id string, now time.Time) error {
			err := s.b.Delete(ctx, backend.DeleteParams{ID: id, Now: now})
			if err == nil {
				s.events.job(jobEvent{ID: id, Change: "deleted"})
			}
			return err
		}, nil
	}
	return nil, badRequest("action", "want retry, cancel or delete")
}
