package server

import (
	"container/list"
	"context"
	"crypto/sha256"
	"net/http"
	"sync"
	"time"

	"github.com/kyuhq/kyu/server/api"
)

// idempotency remembers the answers to enqueue requests that carried an
// Idempotency-Key, so that a retried request gets the first answer and
// enqueues nothing again. It lives in this server process only: a retry
// that reaches another server, or this one after a restart, runs again
// (unique keys are the durable way to refuse duplicates). Entries expire
// after ttl, and the oldest go first beyond max entries or maxBytes of
// remembered answers; an answer larger than maxBytes is not remembered.
type idempotency struct {
	ttl      time.Duration
	max      int
	maxBytes int

	mu    sync.Mutex
	byKey map[string]*list.Element
	order *list.List // of *idemEntry, oldest first
	bytes int        // the sizes of the entries in order
}

// idemEntry is one remembered request; done is closed when its answer is
// known, so a concurrent retry waits for it instead of running again.
type idemEntry struct {
	key     string
	sum     [sha256.Size]byte
	expires time.Time
	done    chan struct{}
	status  int
	body    []byte
	size    int // what the entry counts against maxBytes, once answered
}

// idemOverhead is what an entry costs beside its key and answer: the
// entry, its list element and its map slot.
const idemOverhead = 256

// idemAnswer is what to send: the status and body, and whether they are
// a replay of an earlier answer.
type idemAnswer struct {
	status   int
	body     []byte
	replayed bool
}

func newIdempotency(ttl time.Duration, max, maxBytes int) *idempotency {
	return &idempotency{ttl: ttl, max: max, maxBytes: maxBytes, byKey: make(map[string]*list.Element), order: list.New()}
}

// do returns the remembered answer for key, or runs fn and remembers its
// answer. The same key with another body is a 409. Server errors (5xx)
// and answers larger than maxBytes are not remembered, so a retry runs
// again.
func (c *idempotency) do(ctx context.Context, key string, body []byte, now time.Time, fn func() (int, []byte)) (idemAnswer, error) {
	sum := sha256.Sum256(body)
	c.mu.Lock()
	c.evict(now)
	if el, ok := c.byKey[key]; ok {
		e := el.Value.(*idemEntry)
		c.mu.Unlock()
		if e.sum != sum {
			return idemAnswer{}, &api.Error{Code: api.CodeIdempotencyConflict, Message: "this Idempotency-Key was used with another request body", Field: api.IdempotencyHeader}
		}
		select {
		case <-e.done:
		case <-ctx.Done():
			return idemAnswer{}, &api.Error{Code: api.CodeUnavailable, Message: "gave up waiting for the first request with this Idempotency-Key"}
		}
		return idemAnswer{status: e.status, body: e.body, replayed: true}, nil
	}
	e := &idemEntry{key: key, sum: sum, expires: now.Add(c.ttl), done: make(chan struct{})}
	c.byKey[key] = c.order.PushBack(e)
	for c.order.Len() > c.max {
		c.remove(c.order.Front())
	}
	c.mu.Unlock()

	e.status, e.body = fn()
	size := len(key) + len(e.body) + idemOverhead
	c.mu.Lock()
	if el, ok := c.byKey[key]; ok && el.Value == e {
		if e.status >= http.StatusInternalServerError || size > c.maxBytes {
			c.remove(el)
		} else {
			e.size = size
			c.bytes += size
			for c.bytes > c.maxBytes {
				c.remove(c.order.Front())
			}
		}
	}
	c.mu.Unlock()
	close(e.done)
	return idemAnswer{status: e.status, body: e.body}, nil
}

// evict drops the expired entries, oldest first. c.mu is held.
func (c *idempotency) evict(now time.Time) {
	for el := c.order.Front(); el != nil; el = c.order.Front() {
		if now.Before(el.Value.(*idemEntry).expires) {
			return
		}
		c.remove(el)
	}
}

// remove drops one entry. c.mu is held.
func (c *idempotency) remove(el *list.Element) {
	e := el.Value.(*idemEntry)
	delete(c.byKey, e.key)
	c.bytes -= e.size
	c.order.Remove(el)
}
