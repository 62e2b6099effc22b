package kyu

import (
	"sync/atomic"
	"time"
)

// earlyFactor is how many times its concurrency a pool may have in jobs
// whose handler has returned and whose slot was freed before their outcome
// was recorded (see slots.releaseEarly). At one, a drain of no-op handlers
// waited for each batch's outcomes to be recorded before the next claim
// could take their slots; at two, the claim and the recording of the batch
// before overlap (PostgreSQL and Redis drains with 50 handlers about 10-20 %
// faster, docs/benchmarks.md).
const earlyFactor = 2

// aheadMaxRun bounds the handler run time under which a pool claims
// ahead: a moving average of its handlers' run times (slots.ran) must be
// shorter. Claiming ahead overlaps a claim's commit (well under a
// millisecond to a few) with the handlers' work, which is worth it for
// short jobs only; a job claimed ahead of long ones would wait about as
// long as they run, while another worker might have run it at once.
const aheadMaxRun = 10 * time.Millisecond

// slots owns the handler slots of one pool (a queue with its own
// concurrency, or queues that share one): every change of its counts goes
// through its methods, which keep them consistent with each other and
// with the caps of the pool's queues.
//
// A slot is taken when a job is claimed (acquire) and given back in one of
// three ways:
//   - releaseEarly, as the handler returns and its outcome goes to the
//     completer, unless earlyFactor*limit outcomes already wait with their
//     slots freed: then the slot is held until the outcome is recorded;
//   - releaseOnRecord, once the outcome is recorded or dropped, for a slot
//     that releaseEarly did not free;
//   - release, at once, for a run taken from its handler (shutdown, or a
//     handler that overran its timeout).
//
// A pool may also claim up to ahead jobs more than it has handlers, while
// its handlers run short (see aheadMaxRun): they wait in its handoff for
// a handler to return (see handoff, which keeps the handlers running at
// limit). So a pool runs at most limit handlers, claims at most
// limit+ahead jobs, each queue at most its cap (running and waiting
// together), and holds at most (1+earlyFactor)*limit+ahead leases.
type slots struct {
	limit int32 // concurrency
	ahead int32 // jobs the pool may claim beyond limit (WorkerConfig.ClaimAhead)
	// taken counts the slots taken: jobs claimed and waiting for a
	// handler, jobs whose handler runs, and jobs whose handler has
	// returned but whose slot is held until their outcome is recorded.
	taken atomic.Int32
	// held counts the jobs among taken whose handler has returned and
	// whose slot is held until their outcome is recorded. It is its own
	// counter, not a difference of two, so a reader never sees a transient
	// value: it is raised before the outcome is queued and lowered before
	// the slot is freed and the fetcher woken.
	held atomic.Int32
	// early counts the jobs whose slot was freed when their handler
	// returned and whose outcome is not yet recorded; at most
	// earlyFactor*limit.
	early atomic.Int32

	// runTime is a moving average of the pool's handler run times, in
	// nanoseconds (see ran); it starts at aheadMaxRun, so that a pool
	// claims ahead only once its first handlers have run short.
	runTime atomic.Int64

	// want is how many free slots make a release worth waking the fetcher
	// for (see setWant). Handlers return one by one, and waking the
	// fetcher for each would cost a wake-up per job for nothing.
	want  atomic.Int32
	freed chan struct{} // signalled (coalescing) when slots free up
	// uncapped is set when a queue at its cap got a slot back: the fetcher
	// left it out of its claims, and must claim again.
	uncapped atomic.Bool
}

// slotHold says how a run that has left its handler holds its slot.
type slotHold uint8

const (
	// slotTaken: the slot is taken until the outcome is recorded or
	// dropped (a running handler, or an outcome that is dropped at once).
	slotTaken slotHold = iota
	// slotHeld: the handler returned, and its slot stays taken until the
	// outcome is recorded (counted in held).
	slotHeld
	// slotEarly: the slot was freed as the handler returned (counted in
	// early until the outcome is recorded).
	slotEarly
)

// poolQueue is one queue of a pool: its name, its weight in weighted
// claims, and its cap with the slots it takes.
type poolQueue struct {
	name   string
	weight int
	// max caps the slots the queue may take; 0 is no cap (the pool's
	// limit).
	max   int32
	taken atomic.Int32
}

// room is how many more slots the queue may take, or -1 without a cap.
func (q *poolQueue) room() int32 {
	if q.max == 0 {
		return -1
	}
	return max(q.max-q.taken.Load(), 0)
}

func newSlots(limit, ahead int) *slots {
	s := &slots{limit: int32(limit), ahead: int32(ahead), freed: make(chan struct{}, 1)}
	s.want.Store(1)
	s.runTime.Store(int64(aheadMaxRun))
	return s
}

// ran counts a handler's run time d (nanoseconds) into the moving
// average, with weight 1/8. Handlers return at once, and an update may
// overwrite another: the average only needs to be about right.
func (s *slots) ran(d int64) {
	old := s.runTime.Load()
	s.runTime.Store(old + (d-old)/8)
}

// aheadNow is how many jobs the pool may claim ahead now: ahead while its
// handlers run shorter than aheadMaxRun on average, else none.
func (s *slots) aheadNow() int32 {
	if s.runTime.Load() >= int64(aheadMaxRun) {
		return 0
	}
	return s.ahead
}

// free is how many slots are free now: how many more jobs the pool may
// claim (negative when it stopped claiming ahead with jobs still ahead).
func (s *slots) free() int32 { return s.limit + s.aheadNow() - s.taken.Load() }

// acquire takes a slot for a job just claimed from q.
func (s *slots) acquire(q *poolQueue) {
	s.taken.Add(1)
	q.taken.Add(1)
}

// releaseEarly is called as a handler returns and its outcome is about to
// go to the completer. It frees the job's slot, so that the next claim
// need not wait for the outcome to be recorded (the claim and the
// recording then share a commit), unless earlyFactor*limit outcomes with
// freed slots already wait: then the slot is held until the outcome is
// recorded. It returns how the run now holds its slot.
func (s *slots) releaseEarly(q *poolQueue) slotHold {
	for {
		n := s.early.Load()
		if n >= earlyFactor*s.limit {
			s.held.Add(1)
			return slotHeld
		}
		if s.early.CompareAndSwap(n, n+1) {
			break
		}
	}
	s.release(q)
	return slotEarly
}

// releaseOnRecord is called once a run's outcome is recorded or dropped;
// hold is what releaseEarly returned (slotTaken if it was not called). It
// gives back the slot if the run still held it, and reports whether it did
// (the caller then wakes the fetcher).
func (s *slots) releaseOnRecord(q *poolQueue, hold slotHold) bool {
	switch hold {
	case slotEarly:
		s.early.Add(-1)
		return false
	case slotHeld:
		s.held.Add(-1)
	case slotTaken:
	}
	s.taken.Add(-1)
	s.releaseQueue(q)
	return true
}

// release gives back a slot of q at once, and wakes the fetcher when it
// wants that many free slots.
func (s *slots) release(q *poolQueue) {
	if s.limit+s.aheadNow()-s.taken.Add(-1) >= s.want.Load() {
		s.wake()
	}
	s.releaseQueue(q)
}

// releaseQueue gives back one of q's slots; when q was at its cap the
// fetcher is told to claim again, since its claims left q out.
func (s *slots) releaseQueue(q *poolQueue) {
	if n := q.taken.Add(-1); q.max > 0 && n == q.max-1 {
		s.uncapped.Store(true)
		s.wake()
	}
}

// wake signals the fetcher that slots may have freed up.
func (s *slots) wake() {
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// setWant says how many free slots are worth a wake-up: with more work
// about (more), a full batch, or, while every handler is taken, the
// fewest that let claimSize begin lingering (one without claiming ahead);
// without, none at all (more than the slots). It reports whether that
// many are free already: a slot freed before the store was judged by the
// old want.
func (s *slots) setWant(more bool, batch int32) (ready bool) {
	ahead := s.aheadNow()
	want := s.limit + ahead + 1
	if more {
		want = batch
		if s.taken.Load() >= s.limit {
			want = min(batch, ahead+1)
		}
	}
	s.want.Store(want)
	return s.free() >= want
}

// claimSize returns how many jobs to claim now: none when no slot is
// free. A partial batch waits (wait is true) while slots are about to free
// up, since one full claim costs one commit and several small ones cost
// several: while outcomes that hold their slots are being recorded, while
// jobs claimed ahead wait for handlers (which then lack no work), and,
// for at most fetcherLinger (lingered reports that it has passed), while
// handlers are still running.
func (s *slots) claimSize(batch int32, lingered bool) (n int32, wait bool) {
	free := s.free()
	switch {
	case free <= 0:
		return 0, false
	case free >= batch:
		return batch, false
	}
	if s.held.Load() > 0 {
		return 0, false // the completer frees them and wakes us
	}
	if s.taken.Load() > s.limit {
		return 0, false // jobs claimed ahead wait: no hurry
	}
	// Every taken slot is a running handler, or a job on its way to one.
	if free < s.limit+s.aheadNow() && !lingered {
		return 0, true
	}
	return free, false
}
