package pebble

import (
	"context"
	"errors"
	"fmt"
	"slices"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/kyuhq/kyu/backend"
)

var _ backend.WholeLister = (*Store)(nil)

// ListWhole is List with every job whole, as Get returns it (see
// backend.WholeLister). The payloads and log lines of a page are read
// under the same lock as its records, through one payload iterator for
// the page rather than a snapshot and two lookups per job; a job with a
// write in flight is read by Get once that write is durable.
func (s *Store) ListWhole(ctx context.Context, p backend.ListParams) (backend.ListResult, error) {
	if _, err := p.Check(); err != nil {
		return backend.ListResult{}, err
	}
	return s.list(ctx, p, &wholeReader{})
}

// wholeReader reads the payloads and log lines of the jobs of one List
// page along with their records.
type wholeReader struct {
	payloads pointReader
	// later are the positions in the page of jobs with a write in flight.
	later []int
}

// read completes c, the record of job id with side sd and at position
// pos in the page, from the store's committed state; mu must be held. A
// job with a write in flight is left for finish.
func (w *wholeReader) read(s *store, id jobID, sd side, pos int, c *backend.Job) error {
	if _, ok := s.dirty[id]; ok {
		w.later = append(w.later, pos)
		return nil
	}
	if w.payloads.db == nil {
		w.payloads = pointReader{db: s.db, prefix: prefixPayload}
	}
	c.Payload, c.Logs = nil, nil
	if sd.payload {
		v, _, err := w.payloads.Get(payloadKey(id))
		switch {
		case err == nil:
			c.Payload = append([]byte{}, v...)
		case errors.Is(err, cpebble.ErrNotFound):
			c.Payload = []byte{}
		default:
			return s.breakStore(fmt.Errorf("read payload of %s: %w", id, err))
		}
	}
	if sd.logs > 0 {
		logs, err := readLogs(s.db, id, sd.logs)
		if err != nil {
			return s.breakStore(err)
		}
		c.Logs = logs
	}
	return nil
}

// finish reads the jobs left for later as Get does, now that their writes are
// durable: a job deleted meanwhile, or no longer matching p, leaves the
// page (its cursor stays as it was).
func (w *wholeReader) finish(s *store, p backend.ListParams, res backend.ListResult) (backend.ListResult, error) {
	if len(w.later) == 0 {
		return res, nil
	}
	for _, i := range w.later {
		j, err := s.getSettled(res.Jobs[i].ID)
		switch {
		case errors.Is(err, backend.ErrNotFound):
			res.Jobs[i] = nil
		case err != nil:
			return backend.ListResult{}, err
		case p.Matches(j):
			res.Jobs[i] = j
		default:
			res.Jobs[i] = nil
		}
	}
	res.Jobs = slices.DeleteFunc(res.Jobs, func(j *backend.Job) bool { return j == nil })
	return res, nil
}

// getSettled is Get inside an operation already begun (list's).
func (s *store) getSettled(text string) (*backend.Job, error) {
	id, ok := parseID(text)
	if !ok {
		return nil, backend.ErrNotFound
	}
	if err := s.lockSettled(id); err != nil {
		return nil, err
	}
	snap := s.db.NewSnapshot()
	s.unlock()
	j, err := s.readJob(snap, id)
	_ = snap.Close()
	return j, err
}
