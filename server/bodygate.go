package server

import (
	"context"

	"golang.org/x/sync/semaphore"
)

// largeBody is the size past which a request body waits at the body gate.
const largeBody = 1 << 20

// bodyGate bounds the bytes of large request bodies that handlers work on
// at once (Config.MaxBodyBytesInFlight). A body enters once it has been
// read, and leaves when its handler returns.
type bodyGate struct {
	sem  *semaphore.Weighted
	size int64
}

// newBodyGate builds a gate of size bytes.
func newBodyGate(size int64) *bodyGate {
	return &bodyGate{sem: semaphore.NewWeighted(size), size: size}
}

// enter waits until n bytes of body fit (a body over the gate's size takes
// all of it) or ctx ends, and returns what it holds, for leave.
func (g *bodyGate) enter(ctx context.Context, n int64) (int64, error) {
	n = min(n, g.size)
	if err := g.sem.Acquire(ctx, n); err != nil {
		return 0, err
	}
	return n, nil
}

// leave gives back n bytes taken by enter.
func (g *bodyGate) leave(n int64) {
	if n > 0 {
		g.sem.Release(n)
	}
}
