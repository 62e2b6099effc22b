package kyu_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

// flakyWakeups is a store whose Subscribe fails while failing is set, and
// whose subscriptions the test can end (their channels closed) with end.
type flakyWakeups struct {
	backend.Backend

	mu         sync.Mutex
	failing    bool
	calls      int // Subscribe calls
	failed     int // of them, failed
	ends       []func()
	subscribed changes // announced after each Subscribe call is counted
}

func (f *flakyWakeups) Subscribe(ctx context.Context, p backend.SubscribeParams) (*backend.Subscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.subscribed.announce()
	f.calls++
	if f.failing {
		f.failed++
		return nil, errors.New("flakyWakeups: subscribing fails")
	}
	inner, err := f.Backend.Subscribe(ctx, p)
	if err != nil {
		return nil, err
	}
	// Forward the store's signals to a channel of our own, which end
	// closes.
	c := make(chan struct{}, 1)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			case <-inner.C:
				select {
				case c <- struct{}{}:
				default:
				}
			}
		}
	}()
	var once sync.Once
	end := func() {
		once.Do(func() {
			close(stop)
			<-stopped
			inner.Close()
			close(c)
		})
	}
	f.ends = append(f.ends, end)
	return backend.NewSubscription(c, end), nil
}

func (f *flakyWakeups) setFailing(failing bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing = failing
}

// counts returns how many Subscribe calls there were, and how many failed.
func (f *flakyWakeups) counts() (calls, failed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, f.failed
}

// endAll ends every subscription handed out so far.
func (f *flakyWakeups) endAll() {
	f.mu.Lock()
	ends := f.ends
	f.ends = nil
	f.mu.Unlock()
	for _, end := range ends {
		end()
	}
}

// A worker whose first wake-up subscription fails subscribes again, with
// backoff, until it works, and then starts a new job at once: with an
// hour between polls nothing else would claim it. The failure is logged
// once, not per attempt, and the return once.
func TestWorkerSubscribesAgainAfterFailure(t *testing.T) {
	bubble(t, func(t *testing.T) {
		store := &flakyWakeups{Backend: newStore(t), failing: true}
		c := kyu.NewClient(store, kyu.ClientConfig{})
		var logs logBuffer
		ran := make(chan string, 1)
		startWorker(t, store, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(_ context.Context, job *kyu.Job) error {
				ran <- job.ID
				return nil
			}),
			PollInterval:       time.Hour,
			DisableMaintenance: true,
			Logger:             logs.logger(),
		})
		store.subscribed.waitFor(t, "three failed Subscribe calls (the worker trying again)", func() bool {
			_, failed := store.counts()
			return failed >= 3
		})
		store.setFailing(false)
		id := enqueue(t, c, "later", nil, kyu.EnqueueOptions{})
		if got := recv(t, ran, "the job enqueued once subscribing works to run"); got != id {
			t.Fatalf("ran %s, want %s", got, id)
		}
		out := logs.String()
		if n := strings.Count(out, "no wake-up signals from the backend"); n != 1 {
			t.Errorf("the failure is logged %d times, want once:\n%s", n, out)
		}
		logs.waitLine(t, "wake-up signals are back")
	})
}

// A subscription that ends (its channel closed, as a backend's stream
// that cannot be reopened) is replaced: the worker subscribes again and
// starts a job enqueued afterwards at once.
func TestWorkerSubscribesAgainWhenSubscriptionEnds(t *testing.T) {
	bubble(t, func(t *testing.T) {
		store := &flakyWakeups{Backend: newStore(t)}
		c := kyu.NewClient(store, kyu.ClientConfig{})
		ran := make(chan string, 1)
		startWorker(t, store, kyu.WorkerConfig{
			Handler: kyu.HandlerFunc(func(_ context.Context, job *kyu.Job) error {
				ran <- job.ID
				return nil
			}),
			PollInterval:       time.Hour,
			DisableMaintenance: true,
		})
		store.subscribed.waitFor(t, "the worker to subscribe", func() bool {
			calls, _ := store.counts()
			return calls == 1
		})
		store.endAll()
		store.subscribed.waitFor(t, "the worker to subscribe again after its subscription ended", func() bool {
			calls, _ := store.counts()
			return calls == 2
		})
		id := enqueue(t, c, "after", nil, kyu.EnqueueOptions{})
		if got := recv(t, ran, "the job enqueued after the new subscription to run"); got != id {
			t.Fatalf("ran %s, want %s", got, id)
		}
	})
}
