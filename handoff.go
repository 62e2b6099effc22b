package kyu

import (
	"context"
	"sync"
)

// handoff passes a fetcher's claimed jobs to its handler goroutines, and
// keeps at most limit of them running a job: the jobs a pool claims
// ahead (WorkerConfig.ClaimAhead) wait here for a handler to return.
//
// The fetcher queues each job it claims; a handler goroutine that has
// returned from a job takes the next queued one before it waits, so
// while jobs are queued a goroutine goes from one to the next without
// parking. A job never waits behind a running handler while fewer than
// limit run: while jobs are queued and a handler is free, one goroutine
// is always on its way to them (coming), a waiting one woken or a new one
// started, and each that takes a job calls the next while more are
// queued. So a batch of short jobs is run by as many goroutines as keep
// up with it, not woken one per job, and a batch of long ones still
// starts every job at once, each goroutine waking the next.
type handoff struct {
	mu   sync.Mutex
	wait sync.Cond // L is &mu; signalled once per goroutine called
	// runs[head:] are the jobs queued, oldest first.
	runs []handed
	head int
	// parked counts the goroutines waiting in take; coming counts those
	// woken or started that have not looked at runs yet (at most one,
	// except at close).
	parked, coming int
	// busy counts the goroutines running a job they took, at most limit
	// (the pool's concurrency). A goroutine whose job was taken from its
	// handler (abandoned) leaves the count (leave) though it still runs.
	busy, limit int
	// closed is set when the fetcher's loop has ended: goroutines finding
	// no job end.
	closed bool
}

// handed is a claimed job on its way to a handler goroutine: its run, and
// the context its handler gets.
type handed struct {
	run *jobRun
	ctx context.Context
}

func newHandoff(limit int) *handoff {
	h := &handoff{limit: limit}
	h.wait.L = &h.mu
	return h
}

// put queues claimed jobs. It reports whether the caller must start a
// goroutine, which then calls take with coming set: none waits to be
// woken, and none is on its way.
func (h *handoff) put(runs []handed) (start bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.runs = append(h.runs, runs...)
	return h.call()
}

// call makes sure a goroutine is on its way to the queue: none if one
// already is or limit goroutines are busy (the first to return takes the
// next job), else a waiting one woken; it reports whether there is none
// to wake, and the caller must start one. Under mu.
func (h *handoff) call() (start bool) {
	if h.coming > 0 || h.busy >= h.limit {
		return false
	}
	h.coming++
	if h.parked > 0 {
		h.wait.Signal()
		return false
	}
	return true
}

// take returns the next queued job, waiting for one, or none (a nil run)
// once the handoff is closed and empty. coming says that the caller was
// called (started by put's or take's report), busy that it returns from
// a job it took (and so leaves the busy count); take likewise reports
// whether the caller must start a goroutine for the jobs still queued.
// A job taken counts the caller busy until its next take or leave.
func (h *handoff) take(coming, busy bool) (job handed, start bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if busy {
		h.busy--
	}
	for {
		if coming {
			h.coming--
		}
		if h.head < len(h.runs) && h.busy < h.limit {
			h.busy++
			job = h.runs[h.head]
			h.runs[h.head] = handed{}
			h.head++
			if h.head == len(h.runs) {
				h.runs, h.head = h.runs[:0], 0
			} else if h.head >= cap(h.runs)/2 {
				// Never emptied lately: move the queued jobs to the front
				// rather than let append grow the array.
				n := copy(h.runs, h.runs[h.head:])
				clear(h.runs[n:])
				h.runs, h.head = h.runs[:n], 0
			}
			if h.head < len(h.runs) {
				start = h.call()
			}
			return job, start
		}
		if h.closed {
			// Let the next waiting goroutine see it too.
			if h.parked > 0 {
				h.call()
			}
			return handed{}, false
		}
		h.parked++
		h.wait.Wait()
		h.parked--
		coming = true
	}
}

// leave takes a busy goroutine out of the busy count: its job was taken
// from its handler (abandoned), or it ends without a take. It reports, as
// put does, whether the caller must start a goroutine for the jobs
// queued.
func (h *handoff) leave() (start bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.busy--
	if h.head < len(h.runs) {
		return h.call()
	}
	return false
}

// close takes back the queued jobs no handler will start: those beyond
// the handlers free now (limit less busy), which were claimed ahead. The
// others are still run, as they would have been had the fetcher stopped
// a moment before claiming them. It ends the goroutines that find no
// job; no job may be put after it.
func (h *handoff) close() []*jobRun {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	keep := h.head + min(max(h.limit-h.busy, 0), len(h.runs)-h.head)
	var left []*jobRun
	for _, j := range h.runs[keep:] {
		left = append(left, j.run)
	}
	clear(h.runs[keep:])
	h.runs = h.runs[:keep]
	if h.head == len(h.runs) {
		h.runs, h.head = h.runs[:0], 0
	}
	if h.parked > 0 {
		h.call()
	}
	return left
}
