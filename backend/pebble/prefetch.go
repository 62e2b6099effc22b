package pebble

import (
	"slices"
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
//
// Claims of several sets of queues (the pools of a worker, each with its
// fetcher, or the workers a daemon serves) take turns: each set has a
// slot of its own, which reads ahead for it while another reads ahead for
// another set, and a prefetch forgets only what its slot registered
// before, not the records read for the other sets. Each registration
// carries the tag of the prefetch that made it, so that a prefetch fills
// in only its own registrations (not one another slot made of the same id
// after a write dropped its own) and forgets only its slot's. A slot
// keeps at most maxPrefetch ids, and there are at most maxPrefetchSlots
// slots (the least recently used goes; a set with nothing to read ahead
// takes none): want holds a bounded number of records whatever the
// claims.
type prefetcher struct {
	// slots are the sets of queues read ahead for, the most recently used
	// last; under mu.
	slots []*prefetchSlot
	// tags numbers the prefetches; under mu.
	tags uint64
	// want holds the registered ids and, once read, their records; under
	// the store's mu.
	want map[jobID]prefetched
	// filling is nil but in tests, which set it before any prefetch
	// runs: a prefetch that read records calls it with its slot's queues
	// once done reading, outside mu, before it takes mu to fill them in.
	// Tests block in it to put prefetches in a given order.
	filling func(queues []string)
}

// prefetchSlot reads ahead for the claims of one set of queues.
type prefetchSlot struct {
	// queues is the set, sorted; it does not change.
	queues []string
	// run is held by the one claim prefetching for the set; another
	// skips it.
	run sync.Mutex
	// tag is that of the slot's last prefetch, and owned the ids it
	// registered or took over (some may have been claimed, dropped or
	// taken over since); under mu, and written under run too.
	tag   uint64
	owned []jobID
	// spare is the owned before the last, reused by the next prefetch
	// (under run and mu).
	spare []jobID
	// names decodes the records read (under run).
	names nameCache
	// toRead and read are reused by prefetch (under run).
	toRead []jobID
	read   []prefetched
}

// prefetched is a record read ahead, with its spare copy (see
// loadPending); pair is nil until it is read. tag is that of the
// prefetch that registered it or, once read, the last one to find it
// still at the front of its queues.
type prefetched struct {
	pair *jobPair
	sd   side
	tag  uint64
}

// maxPrefetch bounds the records one prefetch reads, and a slot holds.
const maxPrefetch = 128

// maxPrefetchSlots bounds the sets of queues read ahead for: a worker
// claims for each of its queues (or pools) apart, and a daemon serving
// up to 32 queues keeps a slot for each; beyond, the sets taking turns
// evict each other's slots before their next claims come. At most 4,096
// records read ahead in all.
const maxPrefetchSlots = 32

// slot returns the slot of the set of queues (distinct names), made the
// most recently used, or nil if there is none; mu must be held.
func (pf *prefetcher) slot(queues []string) *prefetchSlot {
	for i, sl := range pf.slots {
		if sl.holds(queues) {
			if i != len(pf.slots)-1 {
				copy(pf.slots[i:], pf.slots[i+1:])
				pf.slots[len(pf.slots)-1] = sl
			}
			return sl
		}
	}
	return nil
}

// add adds a slot for the set of queues (distinct names), dropping the
// least recently used one if there are too many; mu must be held.
func (pf *prefetcher) add(queues []string) *prefetchSlot {
	if len(pf.slots) >= maxPrefetchSlots {
		// A prefetch of the slot under way fills in nothing once its
		// registrations are gone.
		old := pf.slots[0]
		pf.forget(old.owned, old.tag)
		old.owned = nil
		copy(pf.slots, pf.slots[1:])
		pf.slots = pf.slots[:len(pf.slots)-1]
	}
	sl := &prefetchSlot{queues: slices.Sorted(slices.Values(queues))}
	pf.slots = append(pf.slots, sl)
	return sl
}

// holds reports whether the set of sl is that of queues (distinct
// names).
func (sl *prefetchSlot) holds(queues []string) bool {
	if len(queues) != len(sl.queues) {
		return false
	}
	for _, q := range queues {
		if _, ok := slices.BinarySearch(sl.queues, q); !ok {
			return false
		}
	}
	return true
}

// forget drops the registrations of ids still tagged tag; mu must be
// held.
func (pf *prefetcher) forget(ids []jobID, tag uint64) {
	for _, id := range ids {
		if w, ok := pf.want[id]; ok && w.tag == tag {
			delete(pf.want, id)
		}
	}
}

// prefetch reads the records of up to n jobs at the front of queues (in
// claim order) for the next claim of the same set of queues, stopping
// early once g (the commit the caller waits for, which may be nil) is
// durable: past that point the reads would delay the caller, not overlap
// its wait. Records already read ahead (for this set or another) that are
// still at the front are kept, not read again. It is best effort: an
// error only stops it.
func (s *store) prefetch(queues []string, n int, g *commitGroup) {
	if n <= 0 {
		return
	}
	n = min(n, maxPrefetch)
	pf := &s.pre

	s.mu.Lock()
	sl := pf.slot(queues)
	var ids []jobID
	if sl != nil {
		if !sl.run.TryLock() {
			s.mu.Unlock()
			return
		}
		ids = sl.toRead[:0]
	}
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
	if sl == nil {
		// A set of queues with nothing to read ahead takes no slot.
		if len(ids) == 0 {
			s.mu.Unlock()
			return
		}
		sl = pf.add(queues)
		sl.run.Lock() // nobody else has it
	}
	defer sl.run.Unlock()
	pf.tags++
	tag := pf.tags
	owned, toRead := sl.spare[:0], ids[:0]
	for _, id := range ids {
		if w, ok := pf.want[id]; ok {
			// Read ahead already: taken over. Registered and not read
			// yet: another slot's prefetch is reading it, or this one
			// met it twice (a stale entry in another queue).
			if w.pair != nil && w.tag != tag {
				w.tag = tag
				pf.want[id] = w
				owned = append(owned, id)
			}
			continue
		}
		if _, _, inMemory := s.loadMemory(id); inMemory {
			continue
		}
		if pf.want == nil {
			pf.want = make(map[jobID]prefetched, n)
		}
		pf.want[id] = prefetched{tag: tag}
		owned = append(owned, id)
		toRead = append(toRead, id)
	}
	pf.forget(sl.owned, sl.tag)
	sl.spare, sl.owned, sl.tag = sl.owned[:0], owned, tag
	s.mu.Unlock()
	sl.toRead = toRead[:0]
	if len(toRead) == 0 {
		return
	}

	r := pointReader{db: s.db, prefix: prefixJob}
	defer func() { _ = r.Close() }()
	got := sl.read[:0]
	defer func() { clear(got); sl.read = got[:0] }()
	for _, id := range toRead {
		if g != nil && g.durable() {
			break
		}
		p := new(jobPair)
		found, sd, err := s.readKeyInto(&p[0], onwardReader{&r}, r.idKey(id), id, &sl.names)
		if err != nil {
			break
		}
		if !found {
			// A deleted job's entry left in its queue: nothing to keep,
			// but the jobs behind it are read all the same.
			got = append(got, prefetched{})
			continue
		}
		got = append(got, prefetched{pair: p, sd: sd, tag: tag})
	}
	if pf.filling != nil {
		pf.filling(sl.queues)
	}
	s.mu.Lock()
	for i, id := range toRead {
		w, ok := pf.want[id]
		if !ok || w.tag != tag || w.pair != nil {
			continue
		}
		if i < len(got) && got[i].pair != nil {
			pf.want[id] = got[i]
		} else {
			delete(pf.want, id) // not read, or not found
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
