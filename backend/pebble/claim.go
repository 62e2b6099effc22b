package pebble

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/kyuhq/kyu/backend"
)

// claimed is one job a Claim leased.
type claimed struct {
	id  jobID
	job *backend.Job
	sd  side
	// payload is a copy of the payload of a job enqueued in the section
	// that claimed it (waitclaim.go), or the payload read while the
	// claim's commit was on its way (readPayloadsEarly), which
	// claimResult then need not read; nil otherwise.
	payload []byte
}

// Claim leases up to p.Max claimable jobs from p.Queues. It pops the
// queues' ready heaps (no storage scan), first moving to pending the
// queue's scheduled and retry jobs whose run-at has come, and cancels
// instead of handing out a job whose deadline has passed. A paused queue
// is skipped. All claimed jobs are written in one commit.
func (s *store) Claim(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.ClaimResult{}, err
	}
	defer s.end()
	if p.Max <= 0 || len(p.Queues) == 0 {
		return backend.ClaimResult{}, nil
	}
	order := claimOrder(p)

	if err := s.lockState(); err != nil {
		return backend.ClaimResult{}, err
	}
	mark := s.writes
	got, truncated, err := s.claimLocked(order, p, p.Now)
	g := s.groupSince(mark)
	early := !s.importsInFlight()
	s.unlock()
	if err != nil {
		return backend.ClaimResult{}, err
	}
	if g != nil && (early || len(got) == p.Max) {
		// Read while the commit syncs, not before the committer has
		// taken it: on a busy machine the reads would hold up the
		// commit instead.
		<-g.taken
		if early {
			s.readPayloadsEarly(got)
		}
		if len(got) == p.Max {
			s.prefetch(order, p.Max, g)
		}
	}
	if err := wait(g); err != nil {
		return backend.ClaimResult{}, err
	}
	return s.claimResult(got, truncated)
}

// claimResult is the answer to a claim that took got, once its write is
// durable: the jobs with their payloads, in claim order.
func (s *store) claimResult(got []claimed, truncated bool) (backend.ClaimResult, error) {
	// Payloads are written once at enqueue and cannot go away while the
	// job is active, so they are read outside the mutex.
	res := backend.ClaimResult{Jobs: make([]*backend.Job, len(got)), Truncated: truncated}
	locked := false
	defer func() {
		if locked {
			s.payloads.mu.Unlock()
		}
	}()
	for i, c := range got {
		if c.payload != nil {
			c.job.Payload = c.payload
		} else if c.sd.payload {
			if !locked {
				s.payloads.mu.Lock()
				locked = true
			}
			pl, err := s.payloads.read(s, c.id)
			if err != nil {
				return backend.ClaimResult{}, err
			}
			if pl == nil {
				pl = []byte{}
			}
			c.job.Payload = pl
		}
		res.Jobs[i] = c.job
	}
	slices.SortStableFunc(res.Jobs, func(a, b *backend.Job) int {
		switch {
		case a.Priority != b.Priority:
			return b.Priority - a.Priority
		case !a.RunAt.Equal(b.RunAt):
			return a.RunAt.Compare(b.RunAt)
		}
		return strings.Compare(a.ID, b.ID) // the text form sorts as the binary one
	})
	return res, nil
}

// readPayloadsEarly reads the payloads of the jobs a claim took while the
// claim's commit is on its way, so that the claim answers as soon as the
// commit is durable instead of reading them only then. A job's payload is
// written once, at its enqueue, under an id never used before, and cannot
// go away while the job is active: a payload found now is the one
// claimResult would read, and the claim still answers only once its
// commit, and so the enqueue's before it, is durable. A payload whose
// enqueue Pebble does not show yet is not found: claimResult reads it,
// and those after it, and any that an error stopped this from reading.
// Import is the exception (an imported job may reuse a deleted job's id,
// whose old payload Pebble may still show): the caller skips this while a
// group holding imported payloads is in flight (importsInFlight).
func (s *store) readPayloadsEarly(got []claimed) {
	locked := false
	for i := range got {
		c := &got[i]
		if c.payload != nil || !c.sd.payload {
			continue
		}
		if !locked {
			s.payloads.mu.Lock()
			locked = true
		}
		pl, err := s.payloads.read(s, c.id)
		if err != nil || pl == nil {
			break
		}
		c.payload = pl
	}
	if locked {
		s.payloads.mu.Unlock()
	}
}

// importsInFlight reports whether a group that writes imported payloads
// is pending or being committed; mu must be held.
func (s *store) importsInFlight() bool {
	return s.pending != nil && s.pending.importsPayloads ||
		s.committing != nil && s.committing.importsPayloads
}

// claimLocked pops and leases up to p.Max jobs, within p.MaxBytes of
// payload and of p.Types (looking past at most backend.ClaimTypeScan jobs
// of other types per queue), and says whether it stopped for the budget;
// mu must be held.
func (s *store) claimLocked(order []string, p backend.ClaimParams, now time.Time) (got []claimed, truncated bool, err error) {
	var payloads pointReader // lengths of committed payloads, read under mu
	if p.MaxBytes > 0 {
		payloads = pointReader{db: s.db, prefix: prefixPayload}
		defer payloads.Close()
	}
	used := 0
	var skipped []readyEntry // of the queue at hand
	for _, q := range order {
		if len(got) >= p.Max {
			break
		}
		qi := s.idx.queues[q]
		if qi == nil || qi.settings.Paused {
			continue
		}
		if _, _, err := s.promoteQueue(qi, now, s.opts.MaintenanceLimit); err != nil {
			return nil, false, err
		}
		// Entries of jobs of other types than p.Types asks for are popped
		// and pushed back when the queue is done: their jobs keep their
		// place.
		skipped = skipped[:0]
		// A pending job is claimable whatever the claimer's clock says (it
		// may be behind the enqueuer's), so the heap is popped in order.
		for len(got) < p.Max && qi.ready.len() > 0 && len(skipped) <= backend.ClaimTypeScan {
			e := qi.ready.pop()
			j, spare, sd, err := s.loadPending(e.id)
			if err != nil {
				return nil, false, err
			}
			if j == nil || j.State != backend.StatePending || timeCode(j.RunAt) != e.runAt || int8(j.Priority) != e.prio {
				continue // stale entry
			}
			if len(p.Types) > 0 && !slices.Contains(p.Types, j.Type) {
				skipped = append(skipped, e)
				continue
			}
			if deadlinePassed(j, now) {
				s.cancelForDeadline(e.id, j, sd, now)
				continue
			}
			if p.MaxBytes > 0 {
				n, err := s.payloadLen(&payloads, e.id, sd)
				if err != nil {
					return nil, false, err
				}
				if len(got) > 0 && used+n > p.MaxBytes {
					qi.ready.push(e) // untouched: back in its place
					pushAll(qi, skipped)
					return got, true, nil
				}
				used += n
				sd.payloadLen = n
			}
			s.idx.track(j.Queue, e.id, backend.StatePending, backend.StateActive)
			j.State = backend.StateActive
			j.Attempt++
			j.LeaseToken++
			j.WorkerID = p.WorkerID
			j.StartedAt = now
			j.LeaseExpiresAt = now.Add(p.Lease)
			s.put(e.id, j, sd)
			s.idx.activate(e.id, j, j, sd)
			s.noteState(e.id, j)
			if got == nil {
				// Room for as many as the queue holds, not p.Max: an idle
				// worker's claim asks for all its free slots, and is
				// filled (fillWaiting) with the one job just enqueued.
				got = make([]claimed, 0, min(p.Max, maxClaimPrealloc, qi.ready.len()+1))
			}
			got = append(got, claimed{id: e.id, job: j.CloneInto(spare), sd: sd, payload: s.enqueuedPayload(e.id)})
		}
		pushAll(qi, skipped)
	}
	return got, false, nil
}

// maxClaimPrealloc is the most jobs a claim makes room for at once.
const maxClaimPrealloc = 128

// pushAll puts entries popped from a queue's ready heap back.
func pushAll(qi *queueIndex, entries []readyEntry) {
	for _, e := range entries {
		qi.ready.push(e)
	}
}

// payloadLen is the length of a job's payload: known in memory while its
// enqueue's write may be in flight, otherwise read from Pebble (the
// payload key is written with the record, so it is committed when the
// record is). mu must be held.
func (s *store) payloadLen(r *pointReader, id jobID, sd side) (int, error) {
	if !sd.payload {
		return 0, nil
	}
	if sd.payloadLen > 0 {
		return sd.payloadLen, nil
	}
	v, _, err := r.getOnward(r.idKey(id))
	if errors.Is(err, cpebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, s.breakStore(fmt.Errorf("read payload of %s: %w", id, err))
	}
	return len(v), nil
}

// promoteQueue moves up to limit of a queue's scheduled and retry jobs
// whose run-at has come to pending, cancelling those whose deadline has
// passed; mu must be held.
func (s *store) promoteQueue(qi *queueIndex, now time.Time, limit int) (moved, cancelled int, err error) {
	nowCode := timeCode(now)
	for moved+cancelled < limit && qi.timers.len() > 0 && qi.timers.peek().at <= nowCode {
		e := qi.timers.pop()
		j, sd, err := s.load(e.id)
		if err != nil {
			return moved, cancelled, err
		}
		if j == nil || (j.State != backend.StateScheduled && j.State != backend.StateRetry) || timeCode(j.RunAt) != e.at {
			continue // stale entry
		}
		if deadlinePassed(j, now) {
			s.cancelForDeadline(e.id, j, sd, now)
			cancelled++
			continue
		}
		s.toPending(e.id, j, sd)
		moved++
	}
	return moved, cancelled, nil
}

// distinct returns the queues without repeats, in order.
func distinct(queues []string) []string {
	out := make([]string, 0, len(queues))
	for _, q := range queues {
		if !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}

// weightedOrder draws an order of the queues at random, each draw weighted
// by the queue's weight (default, and minimum, 1).
func weightedOrder(queues []string, weights map[string]int) []string {
	weight := func(q string) int {
		if w := weights[q]; w > 0 {
			return w
		}
		return 1
	}
	rest := slices.Clone(queues)
	out := make([]string, 0, len(queues))
	for len(rest) > 0 {
		total := 0
		for _, q := range rest {
			total += weight(q)
		}
		r := rand.IntN(total)
		i := 0
		for ; i < len(rest)-1; i++ {
			r -= weight(rest[i])
			if r < 0 {
				break
			}
		}
		out = append(out, rest[i])
		rest = slices.Delete(rest, i, i+1)
	}
	return out
}

// claimOrder is the order in which a claim of p looks at its queues: each
// named once, weighted when p asks for it.
func claimOrder(p backend.ClaimParams) []string {
	order := distinct(p.Queues)
	if p.Mode == backend.ClaimWeighted {
		order = weightedOrder(order, p.Weights)
	}
	return order
}
