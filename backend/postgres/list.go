package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kyuhq/kyu/backend"
)

// Bounds of a listing with a type or search filter, which reads the rows
// of the other filters in id order and keeps those that match.
const (
	// listChunk is the number of rows read per statement.
	listChunk = 1000
	// listBound is the number of rows one call reads at most once it has a
	// job to return, and listHardBound at most in all (then the page is
	// empty, with a cursor, as backend.ListResult allows).
	listBound     = 20000
	listHardBound = 200000
)

// List pages through jobs in id order. Queue, state and tag filter in SQL
// (the partial indexes of the final states serve a queue and a final
// state; the primary key serves the rest; a tag is jsonb containment of the
// tags array, exact and case-sensitive); type and search are matched in Go with
// backend.ListParams.Matches over bounded reads, so they mean exactly what
// the contract says.
func (s *store) List(ctx context.Context, p backend.ListParams) (backend.ListResult, error) {
	after := p.After()
	if err := s.begin(ctx); err != nil {
		return backend.ListResult{}, err
	}
	defer s.end()
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if p.Queue != "" {
		add("queue = $%d", p.Queue)
	}
	if p.State != "" {
		// A literal (Check allows only the seven names), so that under the
		// store's generic plans the planner can use the state's partial
		// index.
		where = append(where, "state = "+quoteLiteral(string(p.State)))
	}
	if p.Tag != "" {
		tag, err := json.Marshal([]string{p.Tag})
		if err != nil {
			return backend.ListResult{}, fmt.Errorf("list: tag: %w", err)
		}
		add("tags @> $%d::jsonb", string(tag))
	}
	desc := p.Order == backend.NewestFirst
	filtered := p.Type != "" || p.Search != ""
	chunk := p.Limit + 1
	if filtered {
		chunk = listChunk
	}
	var out []*backend.Job
	var res backend.ListResult
	for scanned := 0; ; {
		w, a := where, args
		if after != "" {
			a = append(a[:len(a):len(a)], after)
			op := ">"
			if desc {
				op = "<"
			}
			w = append(w[:len(w):len(w)], fmt.Sprintf("id %s $%d::uuid", op, len(a)))
		}
		q := "SELECT {{listcols}} FROM {{s}}.jobs j"
		if len(w) > 0 {
			q += " WHERE " + strings.Join(w, " AND ")
		}
		// j.id, not id: the first column of the list is named id too, and
		// ordering by that text would sort every matching row.
		q += " ORDER BY j.id"
		if desc {
			q += " DESC"
		}
		q += fmt.Sprintf(" LIMIT %d", chunk)
		rows, err := s.pool.Query(ctx, fill(q, s.schema, s.finished), a...)
		if err != nil {
			return backend.ListResult{}, s.wrap("list", err)
		}
		jobs, err := collectJobs(rows)
		if err != nil {
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
	for _, j := range out {
		j.Payload, j.Result, j.Logs = nil, nil, nil
	}
	res.Jobs = out
	return res, nil
}
