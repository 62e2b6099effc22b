package kyu

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// testRunCtxKey is a value key of the worker's context in these tests.
type testRunCtxKey struct{}

// newTestRunContext returns the context of a run with the given timeout,
// in a worker whose handlers' parent context holds testRunCtxKey.
func newTestRunContext(timeout time.Duration) *runContext {
	w := &Worker{never: make(chan struct{}), noStop: func() bool { return false }}
	w.timeouts.epoch = time.Now()
	w.jobsCtx = context.WithValue(context.Background(), testRunCtxKey{}, "parent")
	run := &jobRun{f: &fetcher{w: w}, timeout: timeout}
	run.ctx.run, run.ctx.index = run, -1
	return &run.ctx
}

// closed reports whether c is closed.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// A handler's context ends as a context.WithCancelCause over a
// context.WithTimeout would, whether it is cancelled or timed out before
// or after its Done is first asked for and contexts are derived from it:
// Err, Cause, Done and the values, its own and derived contexts'.
func TestRunContextEnds(t *testing.T) {
	t.Parallel()
	errCause := errors.New("the cause")
	for _, tc := range []struct {
		name       string
		end        func(c *runContext)
		err, cause error
	}{
		{"cancel", func(c *runContext) { c.cancel(nil) }, context.Canceled, context.Canceled},
		{"cancel with cause", func(c *runContext) { c.cancel(errCause) }, context.Canceled, errCause},
		{"timeout", func(c *runContext) { c.expire() }, context.DeadlineExceeded, context.DeadlineExceeded},
		{"timeout then cancel", func(c *runContext) { c.expire(); c.cancel(errCause) }, context.DeadlineExceeded, context.DeadlineExceeded},
		{"cancel then timeout", func(c *runContext) { c.cancel(errCause); c.expire() }, context.Canceled, errCause},
	} {
		for _, grownFirst := range []bool{false, true} {
			name := tc.name
			if grownFirst {
				name += ", child first"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				c := newTestRunContext(time.Minute)
				var child context.Context
				var childDone <-chan struct{}
				if grownFirst {
					var cancel context.CancelFunc
					child, cancel = context.WithCancel(c)
					defer cancel()
					childDone = child.Done()
					if closed(c.Done()) || closed(childDone) || c.Err() != nil || child.Err() != nil {
						t.Fatal("ended before the end")
					}
				}
				if context.Cause(c) != nil {
					t.Fatalf("Cause = %v before the end", context.Cause(c))
				}
				tc.end(c)
				if !grownFirst {
					var cancel context.CancelFunc
					child, cancel = context.WithCancel(c)
					defer cancel()
					childDone = child.Done()
				}
				if !closed(c.Done()) || !closed(childDone) {
					t.Fatalf("Done closed %v, child's %v; want both", closed(c.Done()), closed(childDone))
				}
				for name, got := range map[string]error{"Err": c.Err(), "child Err": child.Err()} {
					if got != tc.err {
						t.Errorf("%s = %v, want %v", name, got, tc.err)
					}
				}
				for name, got := range map[string]error{"Cause": context.Cause(c), "child Cause": context.Cause(child)} {
					if got != tc.cause {
						t.Errorf("%s = %v, want %v", name, got, tc.cause)
					}
				}
				for name, ctx := range map[string]context.Context{"context": c, "child": child} {
					if run, _ := ctx.Value(runKey{}).(*jobRun); run != c.run {
						t.Errorf("%s's run = %p, want %p", name, run, c.run)
					}
					if v := ctx.Value(testRunCtxKey{}); v != "parent" {
						t.Errorf("%s's parent value = %v", name, v)
					}
				}
			})
		}
	}
}

// Without a timeout the context reports no deadline and ends only when
// cancelled; with one it reports the deadline once the handler starts.
func TestRunContextDeadline(t *testing.T) {
	t.Parallel()
	c := newTestRunContext(0)
	if d, ok := c.Deadline(); ok {
		t.Errorf("Deadline() = %v without a timeout", d)
	}
	child, cancel := context.WithCancel(c)
	defer cancel()
	c.cancel(nil)
	if !closed(child.Done()) || child.Err() != context.Canceled {
		t.Errorf("child Err = %v after cancel", child.Err())
	}

	c = newTestRunContext(time.Minute)
	c.deadline.Store(deadlineAfter(c.run.w().timeouts.now(), time.Minute))
	want := time.Now().Add(time.Minute)
	if d, ok := c.Deadline(); !ok || d.Before(want.Add(-time.Second)) || d.After(want.Add(time.Second)) {
		t.Errorf("Deadline() = %v, %v; want about %v", d, ok, want)
	}
}

// Contexts derived from a handler's context are its children as they
// would be a context.WithCancel's: no goroutine waits for each.
func TestRunContextChildren(t *testing.T) {
	// Not parallel: it counts the process's goroutines.
	c := newTestRunContext(time.Minute)
	before := runtime.NumGoroutine()
	const n = 200
	cancels := make([]context.CancelFunc, 0, n)
	stops := make([]func() bool, 0, n)
	for range n {
		_, cancel := context.WithCancel(c)
		cancels = append(cancels, cancel)
		stops = append(stops, context.AfterFunc(c, func() {}))
	}
	if grew := runtime.NumGoroutine() - before; grew >= n/2 {
		t.Errorf("%d goroutines more after deriving %d contexts", grew, n)
	}
	for i := range cancels {
		cancels[i]()
		if !stops[i]() {
			t.Errorf("AfterFunc %d ran before the context ended", i)
		}
	}
}
