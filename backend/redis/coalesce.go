package redis

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// lineCalls is how many script runs of single-job enqueues of one queue
// go to Redis at once; the jobs that come while that many are on their
// way wait, and go together as one run when one of those returns. Waiting
// for a turn costs the caller a round trip, so ten runs go before any
// waits (docs/benchmarks.md). A run that goes without waiting yields the
// processor once first and takes the jobs that came meanwhile: callers
// woken by one read of replies then share a run and a write (up to
// gatherCap), which cuts Redis's CPU and the client's per job by a
// quarter to a third from ten producers
// (docs/benchmarks.md, "Single enqueues gathered over one yield").
const lineCalls = 10

// gatherCap bounds the jobs a run gathers over its yield: ten producers
// then go in several runs, so that the client builds one while Redis runs
// another. With runs on connections of their own (runconn.go), three
// was ahead of five in every round through kyu bench
// (docs/benchmarks.md, "Runs of single enqueues on connections of their
// own").
const gatherCap = 3

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
	// gathering marks a batch that its first caller sends as soon as it
	// has yielded once, with the jobs that joined meanwhile; the others
	// wait for a call of the line to return (turn).
	gathering bool
	turn      chan struct{} // closed when a call of the line has returned
	done      chan struct{} // closed when res and err are set
	res       backend.EnqueueResult
	err       error
}

// enqueueOne writes the one job of a prepared p: alone when no run of its
// queue is on its way; while fewer than lineCalls are, in a run of its own
// with the jobs that came while it yielded once; else with the batch that
// goes next. Jobs of one batch are written atomically together, each with
// its caller's clock (the script's clock is the latest of them); an error
// of the batch's call is every caller's. A caller whose ctx ends while it
// waits returns ctx's error, and its job may still be written; the caller
// that sends a run of several callers' jobs sends it whatever its own ctx
// does (the call's retries are bounded by Options.RetryFor).
func (s *store) enqueueOne(ctx context.Context, p backend.EnqueueParams) (backend.EnqueueResult, error) {
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
	// A caller that finds no run of the queue on its way goes at once, on
	// its own: no reply is about to wake callers that would join it, so a
	// yield would only delay a lone producer (and wake an idle processor
	// to look for work), and it needs no batch (four allocations and
	// some 450 bytes a call). Callers that come meanwhile start runs of
	// their own, as they do once a run has left.
	if l.calls == 0 {
		l.calls++
		ls.mu.Unlock()
		res, err := s.enqueue(ctx, p, nil, true)
		s.lineDone(q, l)
		return res, err
	}
	// While fewer than lineCalls runs are on their way, a caller starts a
	// run of its own and sends it after one yield of the processor:
	// callers woken by the same read of replies come in meanwhile, and up
	// to gatherCap jobs go in the run (see enqueueBatch.gathering).
	// Otherwise it joins the batch that goes next.
	b := l.next
	if b == nil {
		gathering := l.calls < lineCalls
		if gathering {
			l.calls++
		}
		b = newEnqueueBatch(gathering)
		l.next = b
	}
	i := len(b.jobs)
	b.jobs = append(b.jobs, p.Jobs[0])
	b.nows = append(b.nows, p.Now)
	if b.gathering && len(b.jobs) == gatherCap {
		l.next = nil // full: the next caller starts a run of its own
	}
	ls.mu.Unlock()

	switch {
	case i == 0 && b.gathering:
		// The yield is what gathers. BenchmarkEnqueue (the store's side of
		// kyu bench's single enqueue; go test -c of each build, six pairs,
		// three run each way round, 100,000 jobs, 2026-11-26 on a loaded
		// 2-core machine): 15,614 · 31,400 · 16,325 · 14,820 · 19,894 · 21,531
		// jobs/s with it against 9,157 · 8,875 · 11,104 · 10,320 · 9,230 ·
		// 11,673 without, ahead in every pair (+44 % to +254 %).
		runtime.Gosched()
		s.sendBatch(ctx, q, l, b, p)
	case i == 0:
		// This caller runs the batch: the others wait for it, so it does
		// so even if its ctx ends meanwhile (the call's retries are bounded
		// by Options.RetryFor).
		<-b.turn
		s.sendBatch(ctx, q, l, b, p)
	default:
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

// sendBatch is the first caller's part of batch b of queue q's line l: it
// detaches b (nothing joins it afterwards), writes its jobs, sets b.res
// and b.err and closes b.done, then ends the line's call. p is the first
// caller's own call: a batch of that one job goes as p with its ctx (on
// a connection of its own, a call already sent ends at ctx's deadline,
// not at its cancellation; see ownCtx), a batch of several callers'
// whatever ctx does.
func (s *store) sendBatch(ctx context.Context, q string, l *line, b *enqueueBatch, p backend.EnqueueParams) {
	ls := &s.lines
	ls.mu.Lock()
	if l.next == b {
		l.next = nil
	}
	jobs, nows := b.jobs, b.nows
	ls.mu.Unlock()
	if len(jobs) == 1 {
		b.res, b.err = s.enqueue(ctx, p, nil, true)
	} else {
		b.res, b.err = s.enqueue(context.WithoutCancel(ctx), batchParams(jobs, nows), nows, true)
	}
	close(b.done)
	s.lineDone(q, l)
}

// newEnqueueBatch returns an empty batch; see enqueueBatch.gathering.
func newEnqueueBatch(gathering bool) *enqueueBatch {
	n := batchCap
	if gathering {
		n = gatherCap
	}
	b := &enqueueBatch{
		jobs:      make([]backend.NewJob, 0, n),
		nows:      make([]time.Time, 0, n),
		gathering: gathering,
		done:      make(chan struct{}),
	}
	if !gathering {
		b.turn = make(chan struct{})
	}
	return b
}

// batchParams is the call of a batch's jobs: the script's clock is the
// latest of the callers'.
func batchParams(jobs []backend.NewJob, nows []time.Time) backend.EnqueueParams {
	bp := backend.EnqueueParams{Jobs: jobs, Now: nows[0]}
	for _, t := range nows {
		if t.After(bp.Now) {
			bp.Now = t
		}
	}
	return bp
}

// lineDone ends a call of queue q's line: the batch waiting, if any, takes
// its place.
func (s *store) lineDone(q string, l *line) {
	ls := &s.lines
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if b := l.next; b != nil && !b.gathering {
		l.next = nil
		close(b.turn)
		return
	}
	l.calls--
	if l.calls == 0 {
		delete(ls.queues, q)
	}
}
