package pebble

import (
	"encoding/binary"
	"fmt"
	"runtime"

	cpebble "github.com/cockroachdb/pebble/v2"
)

// commitGroup is the writes of every operation queued since the committer
// last took a group; they are committed as one Pebble batch with one sync.
type commitGroup struct {
	batch *cpebble.Batch
	// dirty names the dirty entries this group wrote, to clear after commit.
	dirty []dirtyRef
	// jids names the entries of store.jids this group wrote, likewise.
	jids []jidRef
	// wake names the queues to signal once the group is durable.
	wake map[string]struct{}
	// finished names the watched jobs that became final or were deleted.
	finished []jobID
	// minutes names the minutes whose counters changed; their current
	// values (and the totals) are written when the committer takes the
	// group, so a batch of completions writes each counter once.
	minutes []int64
	// queueMinutes names the queue minutes whose counters changed,
	// written likewise.
	queueMinutes []queueMinute
	// importsPayloads says the group writes payloads of imported jobs
	// (see payloadReader).
	importsPayloads bool
	// fills are the waiting claims filled in this group (waitclaim.go).
	fills []groupFill
	// retention lists the jobs the group made final by deletion time,
	// written as one key per time when the group is taken
	// (writeRetention); hasRetention is set when it has any, the
	// earliest at retentionMin (see sweepRetention).
	retention    retentionLists
	hasRetention bool
	retentionMin int64
	// sections counts the sections under mu that wrote to the group.
	sections int
	// seq is the group's number (Store.commits), set when it is taken.
	seq uint64
	// taken is closed when the committer takes the group (its commit
	// begins), done when the commit has ended, err then being its
	// failure.
	taken chan struct{}
	done  chan struct{}
	err   error
}

// maxSpareDirty is the largest list of dirty entries kept for the next
// group (see store.spareDirty).
const maxSpareDirty = 4096

type dirtyRef struct {
	id  jobID
	ver uint64
}

// group returns the group collecting writes now, starting one if needed;
// mu must be held, in a section begun by lockState: the section's unlock
// wakes the committer for a group it started (callCommitter).
func (s *store) group() *commitGroup {
	s.writes++
	if s.pending == nil {
		s.pending = &commitGroup{
			batch: s.db.NewBatch(),
			dirty: s.spareDirty,
			taken: make(chan struct{}),
			done:  make(chan struct{}),
		}
		s.spareDirty = nil
		s.callCommitter = true
	}
	return s.pending
}

// wake asks for a signal to the queue's subscribers once the current group
// is durable; mu must be held. While claims wait, the section's fills take
// the queue's new jobs first, and the queue is signalled only when one is
// left pending (fillWaiting): a job a fill took needs no wake-up.
func (s *store) wake(queue string) {
	g := s.group()
	if s.wakeWaiting(queue) {
		return
	}
	g.wakeQueue(queue)
}

// wakeQueue asks for a signal to the queue's subscribers once g is
// durable.
func (g *commitGroup) wakeQueue(queue string) {
	if g.wake == nil {
		g.wake = make(map[string]struct{})
	}
	g.wake[queue] = struct{}{}
}

// groupSince returns the group that holds the writes queued since mark (a
// value of s.writes taken earlier in the same section under mu), or nil
// when the section queued none; mu must be held.
func (s *store) groupSince(mark uint64) *commitGroup {
	if s.writes == mark {
		return nil
	}
	return s.pending
}

// lastGroup returns the newest group whose writes are not yet durable
// (the pending one, else the one being committed), or nil when every write
// queued so far is durable; mu must be held. Groups become durable in
// order, so once it is, so is everything a reader saw under mu: a reader
// waits for it before it answers, and never reports a state that a crash
// could take back. It costs nothing when no write is in flight.
func (s *store) lastGroup() *commitGroup {
	if s.pending != nil {
		return s.pending
	}
	return s.committing
}

// wait blocks until g is durable (g may be nil: nothing was written).
func wait(g *commitGroup) error {
	if g == nil {
		return nil
	}
	<-g.done
	return g.err
}

// commitLoop is the committer: it takes the pending group, commits it with
// a sync, clears the dirty entries it wrote, and wakes its waiters and
// subscribers. It returns, after committing everything queued, once Close
// sets stopping. While an operation commits its own group (unlockWait),
// the committer waits for it: groups are committed one at a time, in
// order.
func (s *store) commitLoop() {
	defer close(s.committerDone)
	s.mu.Lock()
	for {
		for (s.pending == nil || s.committing != nil) && !s.stopping {
			s.commitCond.Wait()
		}
		// Let writes that arrive together share one sync: yield once, so
		// that goroutines woken with the writer (a worker's completer and
		// fetcher, say) can ask for mu, then let every operation that has
		// asked for mu add its writes to this group. Only those that asked
		// before now are waited for, so a steady stream of operations
		// cannot hold a group back.
		s.mu.Unlock()
		runtime.Gosched()
		s.mu.Lock()
		for target := s.entered.Load(); s.left < target && !s.stopping; {
			s.waitLeft = target
			s.commitCond.Wait()
		}
		s.waitLeft = 0
		g := s.pending
		if g == nil {
			s.mu.Unlock()
			return
		}
		s.takeGroup(g)
		s.mu.Unlock()

		err := s.commit(g.batch)

		s.mu.Lock()
		s.finishGroup(g, err)
	}
}

// unlockWait ends a section under mu begun by lockState, as unlock does,
// and waits until g is durable (g may be nil: nothing was written). When
// the store is idle it commits g itself, on the caller's goroutine: an
// operation arriving alone then does not wake the committer and wait for
// it to be scheduled before its log write can start (on a 2-core VM that
// hand-off, with the committer's yield, took about 12 µs of an idle job's
// 0.4 ms). Idle means that the section started g, no other operation is
// in or at a section, no group is being committed, and the last one held
// the writes of one section at most: the waiters a larger group woke are
// likely on their way back, and the committer waits for them (see
// commitLoop), where a group of this section alone would cost them a
// sync of their own.
func (s *store) unlockWait(g *commitGroup) error {
	own := g != nil && g == s.pending && s.callCommitter && s.committing == nil &&
		s.lastSections <= 1 && !s.stopping && s.entered.Load() == s.left+1
	if !own {
		s.unlock()
		return wait(g)
	}
	s.callCommitter = false
	s.endSection()
	s.takeGroup(g)
	s.ownCommits++
	s.mu.Unlock()

	err := s.commit(g.batch)

	s.mu.Lock()
	filled := len(g.fills) > 0
	s.finishGroup(g, err)
	s.mu.Unlock()
	if filled {
		// Let the claims just filled take their jobs before the caller
		// goes on: their goroutines wait on this P's run queue, and would
		// otherwise start only when the caller blocks or another P steals
		// them (some 10 µs later on a 2-core VM).
		runtime.Gosched()
	}
	return g.err
}

// takeGroup makes the pending group g the one being committed and adds
// its last writes: the counters, the retention keys and its number; mu
// must be held.
func (s *store) takeGroup(g *commitGroup) {
	if len(s.held) > 0 {
		s.writeHeld()
	}
	s.pending, s.committing = nil, g
	close(g.taken)
	s.writeCounters(g)
	s.commits++
	g.seq = s.commits
	g.writeRetention()
	_ = g.batch.Set([]byte{prefixCommits}, binary.AppendUvarint(nil, g.seq), nil)
}

// finishGroup ends the commit of g, which err says failed: it clears the
// dirty entries g wrote, wakes g's waiters, its filled claims and its
// subscribers, and calls the committer for a group that came meanwhile;
// mu must be held.
func (s *store) finishGroup(g *commitGroup, err error) {
	s.committing = nil
	s.lastSections = g.sections
	if err != nil {
		err = s.breakStore(err)
	}
	for _, d := range g.dirty {
		if e, ok := s.dirty[d.id]; ok && e.ver == d.ver {
			delete(s.dirty, d.id)
		}
	}
	if cap(g.dirty) <= maxSpareDirty {
		s.spareDirty = g.dirty[:0]
	}
	g.dirty = nil
	for _, r := range g.jids {
		if e, ok := s.jids[r.jid]; ok && e.ver == r.ver {
			delete(s.jids, r.jid)
		}
	}
	if g.importsPayloads && err == nil {
		s.payloads.importsDone.Add(1)
	}
	g.err = err
	close(g.done)
	if err == nil {
		s.synced.Store(g.seq)
		select {
		case s.markWake <- struct{}{}:
		default:
		}
		for q := range g.wake {
			s.signal(q)
		}
		if len(g.finished) > 0 {
			s.signalFinished(g.finished)
		}
	}
	if s.pending != nil {
		s.commitCond.Signal()
	}
	// Last of the goroutines woken here, a filled claim's runs first on
	// this P (the scheduler's next slot): the job it is handed does not
	// wait behind the marker's writer, a subscriber or the committer.
	deliverFills(g) // waitclaim.go
}

// commit writes one batch durably. It fails, too, once Pebble has
// recorded a failure (engineFault).
func (s *store) commit(b *cpebble.Batch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("commit: %v", r)
		}
		_ = b.Close()
	}()
	if err := s.db.Apply(b, cpebble.Sync); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	// Pebble reports a failed log write or sync through Fatalf and then
	// returns no error: the write is not durable.
	if err := s.fault.failed(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
