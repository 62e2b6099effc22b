package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/kyuhq/kyu/backend"
)

// jobsAnswer builds an answer that lists jobs (a list page, a claim)
// within Config.MaxResponseBytes, counted as the jobs' JSON. The first job
// is always taken: one job alone is bounded by the per-job limits.
type jobsAnswer struct {
	budget int
	used   int
	jobs   []jobWire
}

// add takes jobs in order until the next would take the answer over its
// budget, and returns how many it took.
func (a *jobsAnswer) add(jobs []*backend.Job) (int, error) {
	for i, j := range jobs {
		jw, err := newJobWire(j)
		if err != nil {
			return i, err
		}
		n := jw.size() + 1
		if len(a.jobs) > 0 && a.used+n > a.budget {
			return i, nil
		}
		a.used += n
		a.jobs = append(a.jobs, jw)
	}
	return len(jobs), nil
}

// write sends {"jobs":[…]}, with next_cursor when not empty and
// "truncated":true when set.
func (a *jobsAnswer) write(w http.ResponseWriter, nextCursor string, truncated bool) {
	var tail []byte
	if nextCursor != "" {
		c, _ := json.Marshal(nextCursor)
		tail = append(append(tail, `,"next_cursor":`...), c...)
	}
	if truncated {
		tail = append(tail, `,"truncated":true`...)
	}
	tail = append(tail, "}\n"...)
	size := len(`{"jobs":[]`) + len(tail) + a.used
	if len(a.jobs) > 0 {
		size-- // a comma between jobs, none after the last
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(size))
	w.WriteHeader(http.StatusOK)
	out := bufio.NewWriterSize(w, 32<<10)
	out.WriteString(`{"jobs":[`)
	for i := range a.jobs {
		if i > 0 {
			out.WriteByte(',')
		}
		a.jobs[i].writeTo(out)
	}
	out.WriteByte(']')
	out.Write(tail)
	out.Flush()
}
