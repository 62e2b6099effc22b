package memory

import (
	"container/heap"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// queueIndex holds the waiting jobs of one queue so that Claim touches
// only the jobs it promotes, cancels or hands out, never the whole store.
//
// Entries are deleted lazily: a job leaving pending, scheduled or retry
// (claimed, cancelled, deleted, purged) keeps its entry, and the entry is
// dropped when it reaches the top of its heap or when the heap is
// compacted. An entry stands for its job only while the job is still the
// store's job of that id, in a state the heap holds, with the priority and
// RunAt the entry was pushed with; every move into such a state pushes a
// fresh entry (store.index), so each waiting job has a current entry.
type queueIndex struct {
	// ready holds the pending jobs by type, each in claim order (before),
	// so a claim naming types looks only at those types' jobs.
	ready map[string]*entries
	// due holds the scheduled and retry jobs by RunAt.
	due *entries
}

// entry is one job in a heap, with the sort key it had when pushed.
type entry struct {
	job      *backend.Job
	priority int
	runAt    time.Time
}

// entries is a heap of entries: in claim order (before) for pending jobs,
// by RunAt for scheduled and retry jobs.
type entries struct {
	list    []entry
	byRunAt bool
	// kept is the length after the last compaction: the heap is compacted
	// when it grows to twice that (plus some), so stale entries cost
	// amortized constant time and never outnumber live ones for long.
	kept int
}

func (h *entries) Len() int { return len(h.list) }

func (h *entries) Less(i, j int) bool {
	a, b := h.list[i], h.list[j]
	if h.byRunAt {
		if c := a.runAt.Compare(b.runAt); c != 0 {
			return c < 0
		}
		return a.job.ID < b.job.ID
	}
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	if c := a.runAt.Compare(b.runAt); c != 0 {
		return c < 0
	}
	return a.job.ID < b.job.ID
}

func (h *entries) Swap(i, j int) { h.list[i], h.list[j] = h.list[j], h.list[i] }
func (h *entries) Push(x any)    { h.list = append(h.list, x.(entry)) }
func (h *entries) Pop() any {
	x := h.list[len(h.list)-1]
	h.list[len(h.list)-1] = entry{}
	h.list = h.list[:len(h.list)-1]
	return x
}

// current reports whether e still stands for its job in heap h.
func (s *store) current(h *entries, e entry) bool {
	j := e.job
	if s.jobs[j.ID] != j || j.Priority != e.priority || !j.RunAt.Equal(e.runAt) {
		return false
	}
	if h.byRunAt {
		return j.State == backend.StateScheduled || j.State == backend.StateRetry
	}
	return j.State == backend.StatePending
}

// push adds j to h, first compacting h if stale entries may have piled up.
func (s *store) push(h *entries, j *backend.Job) {
	if len(h.list) >= 2*h.kept+64 {
		seen := map[*backend.Job]bool{}
		kept := h.list[:0]
		for _, e := range h.list {
			if s.current(h, e) && !seen[e.job] {
				seen[e.job] = true
				kept = append(kept, e)
			}
		}
		clear(h.list[len(kept):])
		h.list = kept
		h.kept = len(kept)
		heap.Init(h)
	}
	heap.Push(h, entry{job: j, priority: j.Priority, runAt: j.RunAt})
}

// index records j in its queue's index if it is waiting (pending,
// scheduled or retry). Every change that moves a job into one of those
// states, or changes the RunAt of a job in one, calls it.
func (s *store) index(j *backend.Job) {
	qi := s.queueIndexes[j.Queue]
	if qi == nil {
		qi = &queueIndex{ready: map[string]*entries{}, due: &entries{byRunAt: true}}
		s.queueIndexes[j.Queue] = qi
	}
	switch j.State {
	case backend.StatePending:
		h := qi.ready[j.Type]
		if h == nil {
			h = &entries{}
			qi.ready[j.Type] = h
		}
		s.push(h, j)
	case backend.StateScheduled, backend.StateRetry:
		s.push(qi.due, j)
	}
}

// promoteDue makes the scheduled and retry jobs of queue due at now
// pending, or cancels those past their deadline, as Claim does.
func (s *store) promoteDue(queue string, now time.Time) {
	qi := s.queueIndexes[queue]
	if qi == nil {
		return
	}
	for qi.due.Len() > 0 && !qi.due.list[0].runAt.After(now) {
		e := heap.Pop(qi.due).(entry)
		if !s.current(qi.due, e) || s.cancelForDeadline(e.job, now) {
			continue
		}
		e.job.State = backend.StatePending
		s.index(e.job)
	}
}

// next returns the pending job of type typ in queue that a claim would
// take first, or nil. On the way it drops stale entries and cancels the
// jobs past their deadline that it meets; the job returned stays at the
// top of its heap.
func (s *store) next(queue, typ string, now time.Time) *backend.Job {
	qi := s.queueIndexes[queue]
	if qi == nil {
		return nil
	}
	h := qi.ready[typ]
	if h == nil {
		return nil
	}
	for h.Len() > 0 {
		e := h.list[0]
		if !s.current(h, e) || s.cancelForDeadline(e.job, now) {
			heap.Pop(h)
			continue
		}
		return e.job
	}
	delete(qi.ready, typ)
	return nil
}
