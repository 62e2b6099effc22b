package kyu

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// resubscribeMin and resubscribeMax bound the pause before a fetcher tries
// again to subscribe to wake-ups: the first pause after a failure is
// resubscribeMin, each further one doubles, up to resubscribeMax; each is
// varied at random by up to ±20 %, so workers that lost their server
// together do not come back together.
const (
	resubscribeMin = 100 * time.Millisecond
	resubscribeMax = 5 * time.Second
)

// wakeups is a fetcher's subscription to the backend's wake-up signals.
// When subscribing fails (the store or server is down, or a server has no
// stream slot free), or a subscription ends (its channel is closed), it
// subscribes again in the background with backoff until that works, and
// hands the new subscription over through got; meanwhile the fetcher
// relies on its poll. Only the fetcher's loop calls its methods.
type wakeups struct {
	b      backend.Runner
	params backend.SubscribeParams
	log    *slog.Logger

	sub *backend.Subscription // nil while there is none
	// got receives the subscription a background attempt obtained.
	got   chan *backend.Subscription
	tries sync.WaitGroup
}

func newWakeups(b backend.Runner, queues []string, log *slog.Logger) *wakeups {
	return &wakeups{
		b:      b,
		params: backend.SubscribeParams{Queues: queues},
		log:    log,
		got:    make(chan *backend.Subscription),
	}
}

// start subscribes, or when that fails, says so and keeps trying in the
// background until ctx ends.
func (w *wakeups) start(ctx context.Context) {
	sub, err := w.b.Subscribe(ctx, w.params)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("kyu: no wake-up signals from the backend; polling until they are back", "error", err)
			w.retry(ctx)
		}
		return
	}
	w.sub = sub
}

// signals returns the channel the signals arrive on, nil while there is
// no subscription.
func (w *wakeups) signals() <-chan struct{} {
	if w.sub == nil {
		return nil
	}
	return w.sub.C
}

// ended drops a subscription whose channel was closed and subscribes again
// in the background.
func (w *wakeups) ended(ctx context.Context) {
	w.sub.Close()
	w.sub = nil
	if ctx.Err() == nil {
		w.log.Warn("kyu: wake-up subscription ended; polling until it is back")
		w.retry(ctx)
	}
}

// adopt takes the subscription a background attempt obtained.
func (w *wakeups) adopt(sub *backend.Subscription) {
	w.sub = sub
	w.log.Info("kyu: wake-up signals are back")
}

// retry subscribes in a goroutine of its own, with backoff, until it
// succeeds or ctx ends, and hands the subscription to got.
func (w *wakeups) retry(ctx context.Context) {
	w.tries.Go(func() {
		for pause := resubscribeMin; ; pause = min(2*pause, resubscribeMax) {
			timer := time.NewTimer(time.Duration(float64(pause) * (0.8 + 0.4*rand.Float64())))
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
			sub, err := w.b.Subscribe(ctx, w.params)
			switch {
			case err == nil:
				select {
				case w.got <- sub:
				case <-ctx.Done():
					sub.Close()
				}
				return
			case errors.Is(err, backend.ErrClosed) || ctx.Err() != nil:
				return
			}
		}
	})
}

// close ends the subscription and, once ctx has ended, waits for a
// background attempt to give up.
func (w *wakeups) close() {
	w.tries.Wait()
	if w.sub != nil {
		w.sub.Close()
		w.sub = nil
	}
}
