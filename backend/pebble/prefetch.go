package pebble

import (
	"sync"

	"github.com/kyuhq/kyu/backend"
)

// prefetcher reads, while a claim's commit is on its way, the records of
// the jobs the next claim of the same queues is likely to take, so that
// the next claim finds them in memory instead of reading them under mu.
// A worker's claims follow one another, each waiting for its commit's
// sync, and its handlers wait for each; the reads a claim makes under mu
// (most of its time there) then overlap the sync of the one before.
//
// The ids are picked under mu and registered in want; a record read for
// one is kept only while it stays registered: any write of the job
// (markDirty) drops it, and an id is not registered while a write of the
// job is in flight (in the dirty map) or the job is active (its record
// in memory). A registered record was thus last written by a group that
// had finished before the registration, which the iterator opened after
// it sees: it is the record a claim would read under mu.
type prefetcher struct {
	// run is held by the one claim prefetching; another skips it.
	run sync.Mutex
	// names decodes the records read (under run).
	names nameCache
	// ids and read are reused by prefetch (under run).
	ids  []jobID
	read []prefetched

	// want holds the registered ids and, once read, their records; under
	// the store's mu.
	want map[jobID]prefetched
}

// prefetched is a record read ahead, with its spare copy (see
// loadPending); pair is nil until it is read.
type prefetched struct {
	pair *jobPair
	sd   side
}

// maxPrefetch bounds the records one prefetch reads.
const maxPrefetch = 128

// prefetch reads the records of up to n jobs at the front of queues (in
// claim order) for the next claim, stopping early once g (the commit
// the caller waits for, which may be nil) is durable: past that point the
// reads would delay the caller, not overlap its wait. It is best effort:
// an error only stops it.
func (s *store) prefetch(queues []string, n int, g *commitGroup) {
	pf := &s.pre
	if n <= 0 || !pf.run.TryLock() {
		return
	}
	defer pf.run.Unlock()
	n = min(n, maxPrefetch)

	s.mu.Lock()
	clear(pf.want)
	ids := pf.ids[:0]
	for _, q := range queues {
		if len(ids) >= n {
			break
		}
		qi := s.idx.queues[q]
		if qi == nil || qi.settings.Paused {
			continue
		}
		ids = qi.ready.peek(ids, n-len(ids))
	}
	kept := ids[:0]
	for _, id := range ids {
		if _, _, inMemory := s.loadMemory(id); inMemory {
			continue
		}
		if pf.want == nil {
			pf.want = make(map[jobID]prefetched, n)
		}
		pf.want[id] = prefetched{}
		kept = append(kept, id)
	}
	s.mu.Unlock()
	pf.ids = kept[:0]
	if len(kept) == 0 {
		return
	}

	r := pointReader{db: s.db, prefix: prefixJob}
	defer func() { _ = r.Close() }()
	got := pf.read[:0]
	defer func() { clear(got); pf.read = got[:0] }()
	for _, id := range kept {
		if g != nil && g.durable() {
			break
		}
		p := new(jobPair)
		found, sd, err := s.readKeyInto(&p[0], onwardReader{&r}, r.idKey(id), id, &pf.names)
		if err != nil || !found {
			break
		}
		got = append(got, prefetched{pair: p, sd: sd})
	}
	if len(got) == 0 {
		return
	}
	s.mu.Lock()
	for i, p := range got {
		if _, ok := pf.want[kept[i]]; ok {
			pf.want[kept[i]] = p
		}
	}
	s.mu.Unlock()
}

// takePrefetched returns the record of job id read ahead, if it was and
// has not been written since, and forgets it; mu must be held.
func (s *store) takePrefetched(id jobID) (j, spare *backend.Job, sd side, ok bool) {
	w, ok := s.pre.want[id]
	if !ok || w.pair == nil {
		return nil, nil, side{}, false
	}
	delete(s.pre.want, id)
	return &w.pair[0], &w.pair[1], w.sd, true
}

// dropPrefetched forgets a record read ahead of a job being written; mu
// must be held.
func (s *store) dropPrefetched(id jobID) {
	if len(s.pre.want) > 0 {
		delete(s.pre.want, id)
	}
}

// durable reports whether g's commit has ended.
func (g *commitGroup) durable() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}
