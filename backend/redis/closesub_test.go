package redis

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// loopRunning reports whether n's subscription loop has started and not
// yet returned.
func loopRunning(n *notifier) bool {
	n.mu.Lock()
	started, stopped := n.started, n.stopped
	n.mu.Unlock()
	if !started {
		return false
	}
	select {
	case <-stopped:
		return false
	default:
		return true
	}
}

// closeWithCallInFlight starts Close while a call is in flight (entered,
// as a Subscribe that came just before Close), waits until Close has
// marked the store closed and runs late, the rest of that call, and then
// lets Close finish. It returns once Close has.
func closeWithCallInFlight(t *testing.T, s *Store, stopped <-chan struct{}, late func()) {
	t.Helper()
	if err := s.enter(); err != nil {
		t.Fatalf("enter: %v", err)
	}
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	<-s.done
	if stopped != nil {
		<-stopped
	}
	late()
	s.leave()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
}

// TestSubscribeDuringClose: a Subscribe or WatchFinished that entered
// before Close and registers after it fails with ErrClosed, whether the
// store's Pub/Sub loop had already been stopped (a subscription then
// would never be signalled) or had never started (a loop started then
// would outlive Close).
func TestSubscribeDuringClose(t *testing.T) {
	t.Parallel()
	t.Run("LoopStopped", func(t *testing.T) {
		s := openTest(t, "")
		sub, err := s.Subscribe(t.Context(), backend.SubscribeParams{Queues: []string{"q"}})
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		defer sub.Close()
		var late *backend.Subscription
		closeWithCallInFlight(t, s, s.notify.stopped, func() {
			late, err = s.notify.add(t.Context(), &waiter{queues: []string{"q"}, c: make(chan struct{}, 1)})
		})
		if !errors.Is(err, backend.ErrClosed) {
			if late != nil {
				late.Close()
			}
			t.Fatalf("Subscribe registered after Close stopped the loop = %v, %v; want ErrClosed", late, err)
		}
	})
	t.Run("LoopNeverStarted", func(t *testing.T) {
		s := openTest(t, "")
		var err error
		closeWithCallInFlight(t, s, nil, func() {
			_, err = s.finish.add(t.Context(), &waiter{ids: map[string]bool{"x": true}, c: make(chan struct{}, 1)})
		})
		if !errors.Is(err, backend.ErrClosed) {
			t.Fatalf("WatchFinished registered after Close began = %v; want ErrClosed", err)
		}
		s.finish.mu.Lock()
		started := s.finish.started
		s.finish.mu.Unlock()
		if started {
			t.Fatal("WatchFinished started a Pub/Sub loop after Close began")
		}
	})
}

// TestSubscribeRacingClose runs many Subscribe and WatchFinished calls
// while the store closes: each returns promptly, with a subscription or
// ErrClosed, no Pub/Sub loop runs once Close has returned, and none
// logs a lost subscription (a loop started after Close would).
func TestSubscribeRacingClose(t *testing.T) {
	t.Parallel()
	const rounds, callers = 40, 16
	o, err := ParseURL(testURL())
	if err != nil {
		t.Fatalf("test URL: %v", err)
	}
	for round := range rounds {
		logs := &records{}
		o.Prefix, o.RetryFor, o.Logger = testPrefix(t), 2*time.Second, slog.New(logs)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		s, err := Open(ctx, o)
		if err != nil {
			cancel()
			backendtestUnreachable(t, testURL(), err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, callers)
		for i := range callers {
			wg.Go(func() {
				<-start
				var sub *backend.Subscription
				var err error
				if i%2 == 0 {
					sub, err = s.Subscribe(ctx, backend.SubscribeParams{Queues: []string{"q"}})
				} else {
					sub, err = s.WatchFinished(ctx, backend.WatchParams{IDs: []string{"x"}})
				}
				if sub != nil {
					sub.Close()
				}
				if err != nil && !errors.Is(err, backend.ErrClosed) {
					errs <- err
				}
			})
		}
		closed := make(chan struct{})
		go func() {
			<-start
			s.Close()
			close(closed)
		}()
		close(start)
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Close did not return", round)
		}
		for _, n := range []*notifier{s.notify, s.finish} {
			if loopRunning(n) {
				t.Errorf("round %d: a Pub/Sub loop (%s) runs after Close returned", round, n.pattern)
			}
		}
		returned := make(chan struct{})
		go func() {
			wg.Wait()
			close(returned)
		}()
		select {
		case <-returned:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Subscribe calls did not return after Close", round)
		}
		cancel()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: Subscribe during Close: %v; want a subscription or ErrClosed", round, err)
		}
		for _, rec := range logs.at(slog.LevelWarn) {
			t.Errorf("round %d: warning during Close: %s", round, rec.Message)
		}
		if err := dropPrefix(o); err != nil {
			t.Errorf("remove the test keys of prefix %s: %v", o.Prefix, err)
		}
		if t.Failed() {
			return
		}
	}
}
