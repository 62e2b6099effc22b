package server

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// jobsAnswer builds an answer that lists jobs (a list page, a claim)
// within Config.MaxResponseBytes, counted as the jobs' JSON. The first job
// is always taken: one job alone is bounded by the per-job limits.
type jobsAnswer struct {
	budget int
	used   int
	parts  [][]byte
}

// add encodes jobs in order until the next would take the answer over its
// budget, and returns how many it took.
func (a *jobsAnswer) add(jobs []*backend.Job) (int, error) {
	for i, j := range jobs {
		b, err := encodeJSON(api.FromJob(j))
		if err != nil {
			return i, err
		}
		b = bytes.TrimSuffix(b, []byte("\n"))
		if len(a.parts) > 0 && a.used+len(b)+1 > a.budget {
			return i, nil
		}
		a.used += len(b) + 1
		a.parts = append(a.parts, b)
	}
	return len(jobs), nil
}

// write sends {"jobs":[…]}, with next_cursor when not empty and
// "truncated":true when set.
func (a *jobsAnswer) write(w http.ResponseWriter, nextCursor string, truncated bool) {
	out := make([]byte, 0, a.used+len(nextCursor)+48)
	out = append(out, `{"jobs":[`...)
	for i, p := range a.parts {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, p...)
	}
	out = append(out, ']')
	if nextCursor != "" {
		c, _ := json.Marshal(nextCursor)
		out = append(out, `,"next_cursor":`...)
		out = append(out, c...)
	}
	if truncated {
		out = append(out, `,"truncated":true`...)
	}
	out = append(out, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(out)
}
