package faktory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// mutateMaxJobs bounds the jobs one MUTATE examines; past it, it stops
// and says so, and sending it again goes on.
const mutateMaxJobs = 100000

// mutateArgs is what MUTATE carries.
type mutateArgs struct {
	Cmd    string        `json:"cmd"`
	Target string        `json:"target"`
	Filter *mutateFilter `json:"filter"`
	state  backend.State // the kyu state Target names
}

// mutateFilter selects the jobs of a MUTATE. With jids the other fields
// are ignored, as Faktory does; Regexp is a glob (see globMatch) matched
// against the job's JSON as FETCH renders it.
type mutateFilter struct {
	Jobtype string   `json:"jobtype"`
	JIDs    []string `json:"jids"`
	Regexp  string   `json:"regexp"`
}

// empty reports whether f selects every job.
func (f *mutateFilter) empty() bool {
	return f == nil || (f.Jobtype == "" && len(f.JIDs) == 0 && (f.Regexp == "" || f.Regexp == "*"))
}

// stateOfSet maps Faktory's sets onto kyu's states.
func stateOfSet(set string) (backend.State, bool) {
	switch set {
	case "retries":
		return backend.StateRetry, true
	case "scheduled":
		return backend.StateScheduled, true
	case "dead":
		return backend.StateFailed, true
	}
	return "", false
}

// check validates a decoded MUTATE and sets its state.
func (m *mutateArgs) check() error {
	switch m.Cmd {
	case "kill", "requeue", "discard", "clear":
	default:
		return fmt.Errorf("MUTATE: unknown cmd %q (kill, requeue, discard or clear)", m.Cmd)
	}
	s, ok := stateOfSet(m.Target)
	if !ok {
		return fmt.Errorf("MUTATE: unknown target %q (retries, scheduled or dead)", m.Target)
	}
	m.state = s
	return nil
}

// mutate answers MUTATE: kill, requeue or discard the jobs of a set that
// the filter selects; clear discards the whole set.
func (c *conn) mutate(ctx context.Context, m mutateArgs) error {
	now := c.l.cfg.Now()
	if m.Cmd == "clear" || (m.Cmd == "discard" && m.Filter.empty()) {
		if err := c.purgeState(ctx, m.state, now); err != nil {
			return c.out.err("ERR", "MUTATE: "+errText(err))
		}
		return c.out.ok()
	}
	if m.Cmd == "kill" && m.state == backend.StateFailed {
		// Dead jobs are dead already.
		return c.out.ok()
	}
	apply := func(j *backend.Job) error { return c.mutateJob(ctx, m, j, now) }
	var err error
	if m.Filter != nil && len(m.Filter.JIDs) > 0 {
		err = c.mutateJIDs(ctx, m, apply)
	} else {
		err = c.mutateScan(ctx, m, apply)
	}
	if err != nil {
		return c.out.err("ERR", "MUTATE: "+errText(err))
	}
	return c.out.ok()
}

// mutateJIDs applies a MUTATE to the named jobs that are in its set.
func (c *conn) mutateJIDs(ctx context.Context, m mutateArgs, apply func(*backend.Job) error) error {
	for _, jid := range m.Filter.JIDs {
		j, err := c.jobByJID(ctx, jid)
		if errors.Is(err, backend.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if j.State != m.state {
			continue
		}
		if err := apply(j); err != nil {
			return err
		}
	}
	return nil
}

// jobByJID finds a job by its JID, or by its kyu id for a job that has
// none (FETCH sends that id as its jid).
func (c *conn) jobByJID(ctx context.Context, jid string) (*backend.Job, error) {
	if jid == "" {
		return nil, backend.ErrNotFound
	}
	j, err := c.l.b.Get(ctx, backend.GetParams{JID: jid})
	if errors.Is(err, backend.ErrNotFound) {
		j, err = c.l.b.Get(ctx, backend.GetParams{ID: jid})
		var ve *backend.ValidationError
		if errors.As(err, &ve) {
			err = backend.ErrNotFound
		}
	}
	return j, err
}

// mutateScan pages through the jobs of the MUTATE's set (of its jobtype,
// when given) and applies it to those the regexp matches, up to
// mutateMaxJobs examined.
func (c *conn) mutateScan(ctx context.Context, m mutateArgs, apply func(*backend.Job) error) error {
	var f mutateFilter
	if m.Filter != nil {
		f = *m.Filter
	}
	match := f.Regexp != "" && f.Regexp != "*"
	p := backend.ListParams{State: m.state, Type: f.Jobtype, Limit: backend.MaxListLimit}
	seen, changed := 0, 0
	for {
		page, err := c.l.b.List(ctx, p)
		if err != nil {
			return err
		}
		for _, j := range page.Jobs {
			if seen == mutateMaxJobs {
				return fmt.Errorf("stopped after examining %d jobs (%d changed); send it again to go on", seen, changed)
			}
			seen++
			if match {
				// Listed jobs lack their payload; the pattern sees the
				// job whole, as FETCH sends it.
				full, err := c.l.b.Get(ctx, backend.GetParams{ID: j.ID})
				if errors.Is(err, backend.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				b, err := json.Marshal(wireOf(full))
				if err != nil {
					return err
				}
				if !globMatch(f.Regexp, string(b)) {
					continue
				}
				j = full
			}
			if err := apply(j); err != nil {
				return err
			}
			changed++
		}
		if page.NextCursor == "" {
			return nil
		}
		p.Cursor = page.NextCursor
	}
}

// mutateJob applies a MUTATE's cmd to one job of its set: requeue makes
// it pending at once (RunNow, or Retry for a failed job), discard deletes
// it, kill cancels it (kyu has no move to failed for a job that did not
// run). A job that left the set meanwhile is skipped.
func (c *conn) mutateJob(ctx context.Context, m mutateArgs, j *backend.Job, now time.Time) error {
	var err error
	switch {
	case m.Cmd == "discard":
		err = c.l.b.Delete(ctx, backend.DeleteParams{ID: j.ID, Now: now})
	case m.Cmd == "kill":
		_, err = c.l.b.Cancel(ctx, backend.CancelParams{ID: j.ID, Now: now})
	case m.state == backend.StateFailed:
		_, err = c.l.b.Retry(ctx, backend.RetryParams{ID: j.ID, Now: now})
	default:
		_, err = c.l.b.RunNow(ctx, backend.RunNowParams{ID: j.ID, Now: now})
	}
	var se *backend.StateError
	if errors.Is(err, backend.ErrNotFound) || errors.Is(err, backend.ErrJobActive) || errors.As(err, &se) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", m.Cmd, jidOf(j), err)
	}
	return nil
}

// purgeState deletes every job in state, in every queue.
func (c *conn) purgeState(ctx context.Context, state backend.State, now time.Time) error {
	st, err := c.l.b.Stats(ctx, backend.StatsParams{Now: now})
	if err != nil {
		return err
	}
	for _, q := range st.Queues {
		if q.Counts[state] == 0 {
			continue
		}
		if err := c.purge(ctx, q.Name, state, now); err != nil {
			return fmt.Errorf("%s: %w", q.Name, err)
		}
	}
	return nil
}

// jidOf is the jid FETCH sends for j: its JID, or its kyu id.
func jidOf(j *backend.Job) string {
	if j.JID != "" {
		return j.JID
	}
	return j.ID
}
