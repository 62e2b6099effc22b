package mysql

import "sync"

// claimedMax bounds the jobs claimedQueues remembers; past it, claims are
// not remembered and their completions read the queues from the rows.
const claimedMax = 100_000

// claimedQueues remembers the queue of each job this store claimed until
// the job's lease comes back through Complete, Fail or Release, so that a
// plain completion can count its jobs per queue without reading the rows
// again. A job's queue never changes; the completion still checks it in
// the statement that completes the rows, so a stale entry costs a retry on
// the general path, never a wrong count.
type claimedQueues struct {
	mu sync.Mutex
	m  map[string]string
}

func newClaimedQueues() *claimedQueues {
	return &claimedQueues{m: map[string]string{}}
}

// add remembers the queue of a claimed job.
func (c *claimedQueues) add(id, queue string) {
	c.mu.Lock()
	if len(c.m) < claimedMax {
		c.m[id] = queue
	}
	c.mu.Unlock()
}

// lookup returns the queues of ids, in their order, and whether every one
// is known.
func (c *claimedQueues) lookup(ids []string) ([]string, bool) {
	out := make([]string, len(ids))
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, id := range ids {
		q, ok := c.m[id]
		if !ok {
			return nil, false
		}
		out[i] = q
	}
	return out, true
}

// forget drops ids.
func (c *claimedQueues) forget(ids []string) {
	c.mu.Lock()
	for _, id := range ids {
		delete(c.m, id)
	}
	c.mu.Unlock()
}
