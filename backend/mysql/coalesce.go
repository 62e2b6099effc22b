package mysql

import (
	"context"
	"sync"

	"github.com/kyuhq/kyu/backend"
)

// coalesceBatch is the most jobs one coalesced statement writes, and
// coalesceBytes the most payload bytes (well below the server's
// max_allowed_packet, 16 MiB by default). A plain Enqueue within both
// bounds is coalesced with others.
const (
	coalesceBatch = insertChunk
	coalesceBytes = 1 << 20
)

// enqueueLine coalesces plain Enqueue calls (no unique key, within the
// bounds above) that come while another is on its way, batches as well
// as single jobs: concurrent INSERTs into the same index pages spend the
// server's CPU on its latches, and each pays a commit of its own. The
// first caller writes its jobs at once; calls that arrive meanwhile wait,
// and the next of them writes all their jobs in one INSERT, one commit
// for many callers. Each
// call's jobs keep their own creation time, and a call's outcome is what
// it would have been alone: one INSERT is atomic, and when a coalesced
// one fails, each call's jobs are written again on their own so that one
// caller's failure is not another's.
type enqueueLine struct {
	mu      sync.Mutex
	busy    bool
	waiting []*enqueueCall
}

// enqueueCall is one caller's place in the line.
type enqueueCall struct {
	ctx  context.Context
	jobs []*backend.Job
	err  error
	done chan struct{}
	// lead: the call was handed the line and writes for those waiting.
	lead bool
}

// coalescable reports whether pl may wait in the line.
func coalescable(pl *enqueuePlan) bool {
	return len(pl.jobs) <= coalesceBatch && payloadBytes(pl.jobs) <= coalesceBytes && plain(pl.jobs)
}

// payloadBytes is the size of the jobs' payloads.
func payloadBytes(jobs []*backend.Job) int {
	n := 0
	for _, j := range jobs {
		n += len(j.Payload)
	}
	return n
}

// coalesced writes jobs, alone or with the calls waiting.
func (s *store) coalesced(ctx context.Context, jobs []*backend.Job) error {
	l := &s.line
	c := &enqueueCall{ctx: ctx, jobs: jobs, done: make(chan struct{})}
	l.mu.Lock()
	if l.busy {
		l.waiting = append(l.waiting, c)
		l.mu.Unlock()
		<-c.done
		if !c.lead {
			return c.err
		}
		// Handed the line: write for everyone waiting, c included.
	} else {
		l.busy = true
		l.mu.Unlock()
		c.err = s.retrying(ctx, func() error { return s.insertJobs(ctx, s.db, c.jobs) })
		s.passLine()
		return c.err
	}
	return s.leadLine(c)
}

// leadLine writes the jobs of the calls waiting behind c (taken from the
// line when c was handed it) and c's.
func (s *store) leadLine(c *enqueueCall) error {
	l := &s.line
	l.mu.Lock()
	group := []*enqueueCall{c}
	n, size := len(c.jobs), payloadBytes(c.jobs)
	for len(l.waiting) > 0 {
		next := l.waiting[0]
		nextSize := payloadBytes(next.jobs)
		if n+len(next.jobs) > coalesceBatch || size+nextSize > coalesceBytes {
			break
		}
		n, size = n+len(next.jobs), size+nextSize
		group = append(group, next)
		l.waiting = l.waiting[1:]
	}
	l.mu.Unlock()
	all := make([]*backend.Job, 0, n)
	for _, g := range group {
		all = append(all, g.jobs...)
	}
	// The leader's context bounds the statement; the others' calls stay
	// open until it ends.
	err := s.retrying(c.ctx, func() error { return s.insertJobs(c.ctx, s.db, all) })
	if err != nil && len(group) > 1 {
		for _, g := range group {
			g.err = s.retrying(g.ctx, func() error { return s.insertJobs(g.ctx, s.db, g.jobs) })
		}
	} else {
		for _, g := range group {
			g.err = err
		}
	}
	for _, g := range group[1:] {
		close(g.done)
	}
	s.passLine()
	return c.err
}

// passLine hands the line to the first waiting call, or frees it.
func (s *store) passLine() {
	l := &s.line
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.waiting) == 0 {
		l.busy = false
		return
	}
	next := l.waiting[0]
	l.waiting = l.waiting[1:]
	next.lead = true
	close(next.done)
}
