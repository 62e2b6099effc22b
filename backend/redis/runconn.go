package redis

import (
	"context"
	"sync"

	"github.com/redis/rueidis"
)

// runConns lends connections of their own to the script runs of single
// enqueues (coalesce.go), up to lineCalls of them; a run that finds none
// free goes on the shared, pipelined connection.
//
// On a connection of its own, rueidis writes a call and reads its reply
// in the calling goroutine (when the call's ctx has no Done channel or
// has a deadline; see ownCtx), while a call on the shared connection goes
// through its writer and reader goroutines: two goroutine hand-offs per
// run fewer, which is most of a run's wait when ten producers enqueue one
// job at a time (docs/benchmarks.md, "Runs of single enqueues on
// connections of their own"). A Cluster store does not use them: a
// dedicated connection serves one node, and queues live on several.
type runConns struct {
	mu     sync.Mutex
	idle   []*runConn
	made   int // connections lent or idle
	closed bool
}

// runConn is one connection of its own and what gives it back to rueidis.
type runConn struct {
	c       rueidis.DedicatedClient
	release func()
	// primary is, on a Sentinel store, the address of the primary the
	// client sent to when the connection was made (see primaryAddr).
	primary string
}

// take lends an idle connection, or makes one while fewer than lineCalls
// exist; it returns nil when all are lent (or the store is closing).
//
// On a Sentinel store it never lends a connection made to an earlier
// primary: after a failover the Sentinel leaves the old primary taking
// writes for some seconds before it makes it a replica (which drops them),
// and a connection of ours stays open to it until it fails, while the
// shared client has moved on. Such connections are released instead.
func (r *runConns) take(client rueidis.Client) *runConn {
	// Read before Dedicate: a connection made during a switch may then
	// be dropped for nothing, never kept for the old primary.
	primary := primaryAddr(client)
	var stale []*runConn
	defer func() {
		for _, rc := range stale {
			rc.release()
		}
	}()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	for n := len(r.idle); n > 0; n = len(r.idle) {
		rc := r.idle[n-1]
		r.idle[n-1] = nil
		r.idle = r.idle[:n-1]
		if rc.primary == primary {
			r.mu.Unlock()
			return rc
		}
		r.made--
		stale = append(stale, rc)
	}
	if r.made >= lineCalls {
		r.mu.Unlock()
		return nil
	}
	r.made++
	r.mu.Unlock()
	c, release := client.Dedicate()
	return &runConn{c: c, release: release, primary: primary}
}

// primaryAddr returns the address of the primary a Sentinel store's
// client sends to now, and "" for any other store.
func primaryAddr(client rueidis.Client) string {
	if client.Mode() != rueidis.ClientModeSentinel {
		return ""
	}
	for addr := range client.Nodes() {
		return addr
	}
	return ""
}

// give takes back a lent connection. One whose call failed (drop) goes
// back to rueidis, which keeps it only if it still works, and the next
// run makes another: a connection that broke or timed out, or one to a
// server that is no longer the primary (READONLY after a failover), must
// not be lent again.
func (r *runConns) give(rc *runConn, drop bool) {
	r.mu.Lock()
	if drop || r.closed {
		r.made--
		r.mu.Unlock()
		rc.release()
		return
	}
	r.idle = append(r.idle, rc)
	r.mu.Unlock()
}

// close gives every idle connection back to rueidis; connections lent
// meanwhile go back as they are given.
func (r *runConns) close() {
	r.mu.Lock()
	idle := r.idle
	r.idle, r.closed = nil, true
	r.made -= len(idle)
	r.mu.Unlock()
	for _, rc := range idle {
		rc.release()
	}
}

// ownCtx is ctx for a call on a connection of its own: without ctx's
// cancellation, so that rueidis makes the call in the calling goroutine
// (a cancellable ctx without a deadline would start the connection's
// writer and reader goroutines for good), and with ctx's deadline, if it
// has one, which then bounds the call. A call without a deadline is
// bounded by the connection's read and write timeout.
func ownCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Done() == nil {
		return ctx, func() {} // a run of several callers' jobs: already so
	}
	own := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(own, dl)
	}
	return own, func() {}
}

// evalOwn runs one script call on a connection of its own when one is
// free, else (or on a Cluster) on the shared connection (see runConns).
func (s *store) evalOwn(ctx context.Context, c call) rueidis.RedisResult {
	var rc *runConn
	if !s.opts.Cluster {
		rc = s.runConns.take(s.client)
	}
	if rc == nil {
		return s.evalOn(ctx, s.client, c)
	}
	octx, cancel := ownCtx(ctx)
	res := s.evalOn(octx, rc.c, c)
	cancel()
	s.runConns.give(rc, res.Error() != nil)
	return res
}
