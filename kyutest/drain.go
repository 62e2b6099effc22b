package kyutest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

// DefaultDrainTimeout bounds a Drain whose context has no deadline.
const DefaultDrainTimeout = 30 * time.Second

// drainRecheck is how often Drain looks at the store when no signal has
// come: the fallback for stores that send none, and for changes no signal
// announces (a lease that expired into failed).
const drainRecheck = time.Second

// DrainResult says what a Drain ran.
type DrainResult struct {
	// Processed counts the handler calls.
	Processed int
	// Errors holds, in the order they returned, the errors of the calls
	// that failed (a *PanicError for a panic).
	Errors []error
}

// Drain runs a kyu.Worker with h on queues of store (the "default" queue
// when none is named) until none of them holds a job that is pending,
// active, or scheduled or waiting to retry with its time come; then it
// stops the worker and returns. Jobs the handlers enqueue into these
// queues are run too. A job whose retry or run time is still ahead is
// left as it is, as are other queues.
//
// The worker runs one job at a time per queue, in the queue's order, on
// the system clock; its maintenance runs too. Drain waits on the store's
// wake-up signals and on each attempt's end, not on sleeps; it fails the
// test when ctx ends first, or DefaultDrainTimeout passes when ctx has no
// deadline, naming what was left.
func Drain(ctx context.Context, t testing.TB, store backend.Backend, h kyu.Handler, queues ...string) DrainResult {
	t.Helper()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDrainTimeout)
		defer cancel()
	}
	if len(queues) == 0 {
		queues = []string{"default"}
	}
	// Subscribe before the worker starts, so no new pending job goes
	// unheard.
	pending, err := store.Subscribe(ctx, backend.SubscribeParams{Queues: queues})
	if err != nil {
		t.Fatalf("kyutest.Drain: subscribe: %v", err)
	}
	defer pending.Close()

	var (
		mu  sync.Mutex
		res DrainResult
	)
	record := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		res.Processed++
		if err != nil {
			res.Errors = append(res.Errors, err)
		}
	}
	counted := kyu.HandlerFunc(func(ctx context.Context, j *kyu.Job) (err error) {
		defer func() {
			if v := recover(); v != nil {
				record(&PanicError{Value: v})
				panic(v) // for the worker to record, stack and all
			}
		}()
		err = h.ProcessJob(ctx, j)
		record(err)
		return err
	})
	ended := &attemptEnds{Backend: store, c: make(chan struct{}, 1)}
	concurrency := make(map[string]int, len(queues))
	for _, q := range queues {
		concurrency[q] = 1
	}
	w, err := kyu.NewWorker(ended, kyu.WorkerConfig{
		Handler: counted,
		Queues:  concurrency,
		// Nothing runs when Drain stops the worker, unless ctx ended:
		// then there is no time to wait for handlers.
		ShutdownGrace: kyu.NoShutdownGrace,
		Logger:        testLogger(t),
	})
	if err != nil {
		t.Fatalf("kyutest.Drain: %v", err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatalf("kyutest.Drain: start worker: %v", err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if err := w.Shutdown(context.WithoutCancel(ctx)); err != nil {
			t.Errorf("kyutest.Drain: worker shutdown: %v", err)
		}
	}
	defer stop()

	client := kyu.NewClient(store, kyu.ClientConfig{})
	recheck := time.NewTicker(drainRecheck)
	defer recheck.Stop()
	for {
		left, err := workLeft(ctx, client, queues)
		if err != nil && ctx.Err() == nil {
			t.Fatalf("kyutest.Drain: %v", err)
		}
		if err == nil && left == "" {
			break
		}
		select {
		case <-pending.C:
		case <-ended.c:
		case <-recheck.C:
		case <-ctx.Done():
			stop()
			if left == "" {
				left = "unknown work"
			}
			t.Fatalf("kyutest.Drain: %s left when the context ended: %v", left, context.Cause(ctx))
		}
	}
	stop()
	mu.Lock()
	defer mu.Unlock()
	return res
}

// workLeft describes the work queues hold, "" when they hold none: jobs
// pending or active, and scheduled or retry jobs whose time has come.
func workLeft(ctx context.Context, c *kyu.Client, queues []string) (string, error) {
	st, err := c.Stats(ctx, 0)
	if err != nil {
		return "", err
	}
	now := time.Now()
	var left []string
	for _, q := range st.Queues {
		if !slices.Contains(queues, q.Name) {
			continue
		}
		if n := q.Counts[kyu.StatePending] + q.Counts[kyu.StateActive]; n > 0 {
			left = append(left, fmt.Sprintf("%d pending or active in %q", n, q.Name))
			continue
		}
		for _, state := range []kyu.State{kyu.StateScheduled, kyu.StateRetry} {
			if q.Counts[state] == 0 {
				continue
			}
			due, err := dueJobs(ctx, c, q.Name, state, now)
			if err != nil {
				return "", err
			}
			if due > 0 {
				left = append(left, fmt.Sprintf("%d %s and due in %q", due, state, q.Name))
			}
		}
	}
	return strings.Join(left, ", "), nil
}

// dueJobs counts the jobs of queue in state whose run time is not after
// now.
func dueJobs(ctx context.Context, c *kyu.Client, queue string, state kyu.State, now time.Time) (int, error) {
	opts := kyu.ListOptions{Queue: queue, State: state, Limit: backend.MaxListLimit}
	n := 0
	for scanned := 0; scanned < MaxScan; {
		page, err := c.List(ctx, opts)
		if err != nil {
			return 0, err
		}
		for _, j := range page.Jobs {
			if !j.RunAt.After(now) {
				n++
			}
		}
		scanned += len(page.Jobs)
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	return n, nil
}

// attemptEnds passes every call to the store it wraps, and signals c
// after each call by which a worker ends attempts (Complete, Fail,
// Release): the moments a drained queue may have become idle without a
// job becoming pending.
type attemptEnds struct {
	backend.Backend
	c chan struct{}
}

func (a *attemptEnds) signal() {
	select {
	case a.c <- struct{}{}:
	default:
	}
}

// Complete passes the call on and signals.
func (a *attemptEnds) Complete(ctx context.Context, p backend.CompleteParams) (backend.BatchResult, error) {
	defer a.signal()
	return a.Backend.Complete(ctx, p)
}

// Fail passes the call on and signals.
func (a *attemptEnds) Fail(ctx context.Context, p backend.FailParams) (backend.BatchResult, error) {
	defer a.signal()
	return a.Backend.Fail(ctx, p)
}

// Release passes the call on and signals.
func (a *attemptEnds) Release(ctx context.Context, p backend.ReleaseParams) (backend.BatchResult, error) {
	defer a.signal()
	return a.Backend.Release(ctx, p)
}
