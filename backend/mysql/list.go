package mysql

import (
	"context"
	"fmt"
	"strings"

	"github.com/kyuhq/kyu/backend"
)

// Bounds of a listing with a type, tag or search filter, which reads the
// rows of the other filters in id order and keeps those that match.
const (
	// listChunk is the number of rows read per statement.
	listChunk = 1000
	// listBound is the number of rows one call reads at most once it has
	// a job to return, and listHardBound at most in all (then the page is
	// empty, with a cursor, as backend.ListResult allows).
	listBound     = 20000
	listHardBound = 100000
)

// List pages through jobs in id order. Queue and state filter in SQL over
// the indexes jobs_final and jobs_final_all for a final state, the range
// of jobs_claim for another (the primary key serves the rest);
// type, tag and search are matched in Go with backend.ListParams.Matches
// over bounded reads, so they mean exactly what the contract says.
func (s *store) List(ctx context.Context, p backend.ListParams) (backend.ListResult, error) {
	after := p.After()
	if err := s.begin(ctx); err != nil {
		return backend.ListResult{}, err
	}
	defer s.end()
	var where []string
	var args []any
	index := "PRIMARY"
	if p.Queue != "" {
		where = append(where, "j.queue = ?")
		args = append(args, p.Queue)
	}
	switch {
	case p.State.Final():
		where = append(where, "j.final_state = ?")
		args = append(args, string(p.State))
		index = "jobs_final_all"
		if p.Queue != "" {
			index = "jobs_final"
		}
	case p.State != "":
		// The states that are not final are few: their range of
		// jobs_claim, sorted.
		where = append(where, "j.state = ?")
		args = append(args, string(p.State))
		index = "jobs_claim"
	}
	desc := p.Order == backend.NewestFirst
	filtered := p.Type != "" || p.Search != "" || p.Tag != ""
	chunk := p.Limit + 1
	if filtered {
		chunk = listChunk
	}
	var out []*backend.Job
	var res backend.ListResult
	for scanned := 0; ; {
		w, a := where, args
		if after != "" {
			op := ">"
			if desc {
				op = "<"
			}
			w = append(w[:len(w):len(w)], "j.id "+op+" ?")
			a = append(a[:len(a):len(a)], after)
		}
		q := "SELECT " + selectCols(false) + " FROM " + s.table("jobs") + " j"
		if p.Queue == "" || p.State != "" {
			q += " FORCE INDEX (" + index + ")"
		}
		if len(w) > 0 {
			q += " WHERE " + strings.Join(w, " AND ")
		}
		q += " ORDER BY j.id"
		if desc {
			q += " DESC"
		}
		q += fmt.Sprintf(" LIMIT %d", chunk)
		var jobs []*backend.Job
		if err := s.queryRows(ctx, s.db, q, a, false, func(r *row) { jobs = append(jobs, r.Job) }); err != nil {
			return backend.ListResult{}, s.wrap("list", err)
		}
		for _, j := range jobs {
			if !filtered || p.Matches(j) {
				out = append(out, j)
			}
		}
		if len(out) > p.Limit {
			out = out[:p.Limit]
			res.NextCursor = p.NextCursor(out[len(out)-1].ID)
			break
		}
		if len(jobs) < chunk {
			break
		}
		after = jobs[len(jobs)-1].ID
		scanned += len(jobs)
		if (scanned >= listBound && len(out) > 0) || scanned >= listHardBound {
			res.NextCursor = p.NextCursor(after)
			break
		}
	}
	res.Jobs = out
	return res, nil
}
