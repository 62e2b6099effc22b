package redis

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// lineCalls is how many single-job enqueues of one queue go to Redis at
// once, each on its own; the ones that come while that many are on their
// way wait, and go together as one script run when one of those returns.
// Sharing a run saves Redis little (a single enqueue cost it 17-18 µs of
// CPU per job in runs of three jobs, 18-23 µs in runs of one), while
// waiting for a turn costs the caller a round trip: ten producers enqueue
// faster each on their own (docs/benchmarks.md), and only more than ten
// at once share runs.
const lineCalls = 10

// batchCap is the room a new batch makes for jobs: as many as usually
// join one while lineCalls calls are on their way, so it seldom grows.
const batchCap = 8

// lines coalesces concurrent single-job Enqueue calls per queue (see
// lineCalls). The zero value is ready to use.
type lines struct {
	mu     sync.Mutex
	queues map[string]*line
}

// line is one queue's: calls on their way, and the batch waiting.
type line struct {
	calls int
	next  *enqueueBatch
}

// enqueueBatch is single jobs of several callers that go as one call. The
// first caller to join runs it when its turn comes; the others wait for
// done.
type enqueueBatch struct {
	jobs []backend.NewJob
	nows []time.Time
	turn chan struct{} // closed when a call of the line has returned
	done chan struct{} // closed when res and err are set
	res  backend.EnqueueResult
	err  error
}

// enqueueOne writes the one job of a prepared p, on its own while fewer
// than lineCalls of its queue are on their way, else with the batch that
// goes next. Jobs of one batch are written atomically together, each with
// its caller's clock (the script's clock is the latest of them); an error
// of the batch's call is every caller's. A caller whose ctx ends while it
// waits returns ctx's error, and its job may still be written.
func (s *Store) enqueueOne(ctx context.Context, p backend.EnqueueParams) (backend.EnqueueResult, error) {
	q := p.Jobs[0].Queue
	ls := &s.lines
	ls.mu.Lock()
	if ls.queues == nil {
		ls.queues = map[string]*line{}
	}
	l := ls.queues[q]
	if l == nil {
		l = &line{}
		ls.queues[q] = l
	}
	if l.calls < lineCalls && l.next == nil {
		l.calls++
		ls.mu.Unlock()
		res, err := s.enqueue(ctx, p, nil)
		s.lineDone(q, l)
		return res, err
	}
	b := l.next
	if b == nil {
		b = &enqueueBatch{
			jobs: make([]backend.NewJob, 0, batchCap), nows: make([]time.Time, 0, batchCap),
			turn: make(chan struct{}), done: make(chan struct{}),
		}
		l.next = b
	}
	i := len(b.jobs)
	b.jobs = append(b.jobs, p.Jobs[0])
	b.nows = append(b.nows, p.Now)
	ls.mu.Unlock()

	if i == 0 {
		// This caller runs the batch: the others wait for it, so it does
		// so even if its ctx ends meanwhile (the call's retries are bounded
		// by Options.RetryFor).
		<-b.turn
		ls.mu.Lock()
		// Nothing joins the batch once its turn has come (lineDone
		// detached it), so its jobs are read under the lock only for the
		// race detector's sake.
		jobs, nows := b.jobs, b.nows
		ls.mu.Unlock()
		bp := backend.EnqueueParams{Jobs: jobs, Now: nows[0]}
		for _, t := range nows {
			if t.After(bp.Now) {
				bp.Now = t
			}
		}
		b.res, b.err = s.enqueue(context.WithoutCancel(ctx), bp, nows)
		close(b.done)
		s.lineDone(q, l)
	} else {
		select {
		case <-b.done:
		case <-ctx.Done():
			return backend.EnqueueResult{}, fmt.Errorf("kyu/redis: enqueue: waiting for a shared call: %w", ctx.Err())
		}
	}
	if b.err != nil {
		return backend.EnqueueResult{}, b.err
	}
	// The callers share the batch's result slice, each its own element
	// (capped, so an append copies instead of writing over the next).
	return backend.EnqueueResult{Jobs: b.res.Jobs[i : i+1 : i+1]}, nil
}

// lineDone ends a call of queue q's line: the batch waiting, if any, takes
// its place.
func (s *Store) lineDone(q string, l *line) {
	ls := &s.lines
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if b := l.next; b != nil {
		l.next = nil
		close(b.turn)
		return
	}
	l.calls--
	if l.calls == 0 {
		delete(ls.queues, q)
	}
}
