package faktory

import (
	"context"
	"sync"

	"github.com/kyuhq/kyu/backend"
)

// batcherMax bounds the items of one call.
const batcherMax = 1000

// batcher applies items that many connections submit at the same time
// with one store call (kyu's Worker records outcomes the same way, in its
// completer): while a call runs, the items that come wait, and the next
// call takes them all, so a store that commits durably syncs once for
// them. No goroutine of its own: the first submitter finding no call
// running makes the call, and when items are left it hands the next call
// to the first of their submitters.
type batcher[T any] struct {
	apply func(ctx context.Context, items []T) (backend.BatchResult, error)

	mu      sync.Mutex
	pending []*batchItem[T]
	busy    bool // a submitter is making a call
}

// batchItem is one submitted item and where its submitter waits.
type batchItem[T any] struct {
	item T
	done chan batchAnswer // capacity 1
}

// batchAnswer is an item's error, or the turn to make the next call.
type batchAnswer struct {
	err  error
	lead bool
}

// do applies item, in a call with whatever else is waiting, and returns
// its error.
func (b *batcher[T]) do(ctx context.Context, item T) error {
	it := &batchItem[T]{item: item, done: make(chan batchAnswer, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, it)
	lead := !b.busy
	b.busy = true
	b.mu.Unlock()
	for {
		if lead {
			b.call(ctx)
		}
		a := <-it.done
		if !a.lead {
			return a.err
		}
		lead = true
	}
}

// call applies the pending items (up to batcherMax), answers each, and
// passes the lead to the first item left, or ends the busy spell.
func (b *batcher[T]) call(ctx context.Context) {
	b.mu.Lock()
	n := min(len(b.pending), batcherMax)
	batch := make([]*batchItem[T], n)
	copy(batch, b.pending)
	rest := copy(b.pending, b.pending[n:])
	clear(b.pending[rest:])
	b.pending = b.pending[:rest]
	b.mu.Unlock()

	items := make([]T, n)
	for i, it := range batch {
		items[i] = it.item
	}
	res, err := b.apply(ctx, items)
	for i, it := range batch {
		e := err
		if e == nil && i < len(res.Errors) {
			e = res.Errors[i]
		}
		it.done <- batchAnswer{err: e}
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		b.busy = false
		return
	}
	b.pending[0].done <- batchAnswer{lead: true}
}
