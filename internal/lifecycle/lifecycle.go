// Package lifecycle gives every background loop of kyu one Start/Stop
// discipline: Start runs the loop in a goroutine unless it already runs,
// Stop cancels the loop's context and waits for the goroutine to return.
// Both are idempotent and safe to call concurrently; a stopped loop may be
// started again.
package lifecycle

import (
	"context"
	"sync"
)

// Loop runs one background goroutine at a time. The zero value is ready.
type Loop struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs fn in a new goroutine with a context derived from ctx that Stop
// cancels. It reports false, and does nothing, when the loop already runs.
// fn should return soon after its context is done, and must not call Stop
// on its own Loop.
func (l *Loop) Start(ctx context.Context, fn func(ctx context.Context)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done != nil {
		return false
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	l.cancel, l.done = cancel, done
	go func() {
		defer close(done)
		defer cancel()
		fn(ctx)
	}()
	return true
}

// Stop cancels the running goroutine's context and waits until it has
// returned. It does nothing when the loop does not run. Concurrent callers
// all return only after the goroutine has returned.
func (l *Loop) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		return
	}
	l.cancel()
	<-l.done
	l.cancel, l.done = nil, nil
}

// Running reports whether a goroutine started by Start has not been stopped.
// The goroutine may have returned on its own already.
func (l *Loop) Running() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done != nil
}

// Done returns a channel closed when the current goroutine returns, or nil
// when the loop does not run.
func (l *Loop) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}
