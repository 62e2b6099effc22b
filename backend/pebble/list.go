package pebble

import (
	"context"

	"github.com/kyuhq/kyu/backend"
)

// listScanLimit bounds the records one List call examines when filters by
// type or search reject most of them: the page then ends early, with a
// cursor to go on from, so one call never holds the store for long.
const listScanLimit = 1000

// List pages through jobs in id order with filters. The candidates come
// from the in-memory per-queue, per-state id sets (every job's id is in
// exactly one), merged in id order: a queue and a state name one set, a
// queue alone its seven, a state alone that state's set of every queue.
// Active jobs, as few as the leases held, come from the lease map, sorted
// for the call.
// Only the jobs examined are read, so the first page costs the same
// however many jobs the store holds. Type, tag and search filters are checked
// on the records read, at most listScanLimit of them per call. Listed jobs
// carry no Payload, Result or Logs. List answers once every write in
// flight when it read is durable, so the page it returns, the jobs it
// leaves out included, survives a crash.
func (s *store) List(ctx context.Context, p backend.ListParams) (backend.ListResult, error) {
	return s.list(ctx, p, nil)
}

// list is List; with w, each job listed is read whole into w as well (see
// ListWhole).
func (s *store) list(ctx context.Context, p backend.ListParams, w *wholeReader) (backend.ListResult, error) {
	afterText := p.After()
	var after *jobID
	if afterText != "" {
		id, ok := parseID(afterText)
		if !ok {
			return backend.ListResult{}, &backend.ValidationError{Index: -1, Field: "cursor", Reason: "not a cursor this listing gave"}
		}
		after = &id
	}
	if err := s.begin(ctx); err != nil {
		return backend.ListResult{}, err
	}
	defer s.end()
	if err := s.lockState(); err != nil {
		return backend.ListResult{}, err
	}
	var sets []*idSet
	for name, qi := range s.idx.queues {
		if p.Queue != "" && name != p.Queue {
			continue
		}
		for _, st := range backend.States() {
			if st != backend.StateActive && (p.State == "" || st == p.State) {
				sets = append(sets, &qi.byState[stateCode(st)])
			}
		}
	}
	if p.State == "" || p.State == backend.StateActive {
		sets = append(sets, s.idx.activeSets(func(q string) bool { return p.Queue == "" || q == p.Queue })...)
	}
	m := newMergeIter(sets, after, p.Order == backend.NewestFirst)
	var res backend.ListResult
	var lastScanned jobID
	scanned := 0
	for {
		id, ok := m.next()
		if !ok {
			break
		}
		if scanned == listScanLimit {
			// The scan bound ends this page early; every id examined
			// after the page's last job did not match.
			res.NextCursor = p.NextCursor(lastScanned.String())
			break
		}
		scanned++
		lastScanned = id
		j, sd, err := s.load(id)
		if err != nil {
			s.unlock()
			return backend.ListResult{}, err
		}
		if j == nil || !p.Matches(j) {
			continue
		}
		if len(res.Jobs) == p.Limit {
			// One more job matches: the page is full and not the last.
			res.NextCursor = p.NextCursor(res.Jobs[len(res.Jobs)-1].ID)
			break
		}
		c := j.Clone()
		if w != nil {
			if err := w.read(s, id, sd, len(res.Jobs), c); err != nil {
				_ = w.payloads.Close()
				s.unlock()
				return backend.ListResult{}, err
			}
		} else {
			c.Payload, c.Result, c.Logs = nil, nil, nil
		}
		res.Jobs = append(res.Jobs, c)
	}
	if w != nil {
		if err := w.payloads.Close(); err != nil {
			err = s.breakStore(err)
			s.unlock()
			return backend.ListResult{}, err
		}
	}
	g := s.lastGroup()
	s.unlock()
	if err := wait(g); err != nil {
		return backend.ListResult{}, err
	}
	if w != nil {
		return w.finish(s, p, res)
	}
	return res, nil
}
