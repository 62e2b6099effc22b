package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// signalWait bounds how long a wake-up may take to arrive. It is a
// deadline, not a sleep: the wait ends as soon as the signal does.
const signalWait = 5 * time.Second

// subscribe opens a subscription to queues and closes it with the test.
func (f *fixture) subscribe(queues ...string) *backend.Subscription {
	f.t.Helper()
	sub, err := f.b.Subscribe(f.ctx, backend.SubscribeParams{Queues: queues})
	if errors.Is(err, backend.ErrNotSupported) {
		f.t.Skip("the store cannot signal (Subscribe: ErrNotSupported); workers poll")
	}
	if err != nil {
		f.t.Fatalf("Subscribe(%v): %v", queues, err)
	}
	if sub == nil || sub.C == nil {
		f.t.Fatalf("Subscribe(%v) returned no channel", queues)
	}
	f.t.Cleanup(sub.Close)
	return sub
}

// wantSignal waits for a signal on sub.
func (f *fixture) wantSignal(sub *backend.Subscription, why string) {
	f.t.Helper()
	select {
	case <-sub.C:
	case <-time.After(signalWait):
		f.t.Fatalf("no wake-up within %s after %s", signalWait, why)
	}
}

func testSubscribe(t *testing.T, factory Factory) {
	// Each case prepares the queue, subscribes, and then makes one job
	// pending; subscribing after the preparation keeps its own signals out.
	cases := []struct {
		name    string
		prepare func(f *fixture) func()
	}{
		{"Enqueue", func(f *fixture) func() {
			return func() { f.enqueueOne(backend.NewJob{}) }
		}},
		{"Promote", func(f *fixture) func() {
			f.enqueueOne(backend.NewJob{RunAt: f.now.Add(time.Minute)})
			return func() { f.advance(time.Minute); f.promote() }
		}},
		{"Release", func(f *fixture) func() {
			f.enqueueOne(backend.NewJob{})
			j := f.claimOne()
			return func() { f.mustOK("Release", f.release(lease(j))) }
		}},
		{"RecoverLeases", func(f *fixture) func() {
			f.enqueueOne(backend.NewJob{})
			j := f.claimOne()
			return func() { f.now = j.LeaseExpiresAt; f.recoverLeases() }
		}},
		{"FailRetryNow", func(f *fixture) func() {
			f.enqueueOne(backend.NewJob{})
			j := f.claimOne()
			return func() { f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "again", RetryAt: f.now})) }
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := start(t, factory)
			act := c.prepare(f)
			sub := f.subscribe(f.queue)
			act()
			f.wantSignal(sub, c.name+" made a job pending in the subscribed queue")
		})
	}

	t.Run("ManyQueues", func(t *testing.T) {
		f := start(t, factory)
		other := uniqueQueue(t, "-second")
		sub := f.subscribe(f.queue, other)
		f.enqueueOne(backend.NewJob{Queue: other})
		f.wantSignal(sub, "an enqueue into the second of two subscribed queues")
	})

	t.Run("AllQueues", func(t *testing.T) {
		f := start(t, factory)
		sub := f.subscribe()
		f.enqueueOne(backend.NewJob{})
		f.wantSignal(sub, "an enqueue, with a subscription naming no queue (every queue)")
	})

	t.Run("CloseTwice", func(t *testing.T) {
		f := start(t, factory)
		sub := f.subscribe(f.queue)
		sub.Close()
		sub.Close()
	})
}
