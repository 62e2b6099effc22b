package kyu

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kyuhq/kyu/backend"
)

// PoolConfig is a set of queues that share one number of handlers
// (WorkerConfig.Pool). Each claim takes jobs from the pool's queues in one
// Claim call (see Max for the exception), as many as the pool has free
// slots (up to ClaimBatch):
//
//   - with no weights (every Weight 0), in strict order: the first queue
//     listed that has claimable jobs gives them, then the next one, so a
//     later queue is served only while the earlier ones are empty;
//   - with weights (every Weight positive), in weighted order: each claim
//     orders the queues at random, a queue coming first with a chance in
//     proportion to its weight, and takes from them in that order.
//
// A paused queue gives nothing, and a queue at its cap (Max) is left out
// of the claims until one of its jobs ends.
type PoolConfig struct {
	// Concurrency is how many jobs of the pool's queues may run at once,
	// all queues together. Required: at least 1.
	Concurrency int

	// Queues lists the pool's queues, each once, in strict order if no
	// queue has a weight. Required: at least one.
	Queues []PoolQueue
}

// PoolQueue is one queue of a PoolConfig.
type PoolQueue struct {
	// Name names the queue. Required.
	Name string

	// Weight is the queue's share of weighted claims. Either every queue
	// of the pool has a weight (at least 1) or none has (all 0: strict
	// order).
	Weight int

	// Max caps how many of the queue's jobs may run at once, so that a
	// slow queue cannot take the whole pool. Default 0: no cap beyond the
	// pool's Concurrency. A queue whose cap leaves it less room than the
	// claim's size is asked in a Claim call of its own, for no more jobs
	// than its room, in its place in the order.
	Max int
}

// weighted reports whether the pool's claims are weighted.
func (p *PoolConfig) weighted() bool {
	return len(p.Queues) > 0 && p.Queues[0].Weight > 0
}

// validate reports the first problem of the pool; own names the queues of
// WorkerConfig.Queues, which the pool may not share.
func (p *PoolConfig) validate(own map[string]int) error {
	if p.Concurrency < 1 {
		return fmt.Errorf("kyu: WorkerConfig.Pool.Concurrency is %d, want at least 1", p.Concurrency)
	}
	if len(p.Queues) == 0 {
		return fmt.Errorf("kyu: WorkerConfig.Pool.Queues is empty, want at least one queue")
	}
	seen := make(map[string]bool, len(p.Queues))
	weighted := p.weighted()
	for i, q := range p.Queues {
		_, shared := own[q.Name]
		switch {
		case !backend.ValidQueueName(q.Name):
			return fmt.Errorf("kyu: WorkerConfig.Pool.Queues[%d]: %q is not 1-128 characters of [A-Za-z0-9._:-]", i, q.Name)
		case seen[q.Name]:
			return fmt.Errorf("kyu: WorkerConfig.Pool.Queues[%d]: queue %q is listed twice", i, q.Name)
		case shared:
			return fmt.Errorf("kyu: WorkerConfig.Pool.Queues[%d]: queue %q is also in WorkerConfig.Queues; a queue is served by one pool", i, q.Name)
		case q.Weight < 0:
			return fmt.Errorf("kyu: WorkerConfig.Pool.Queues[%d]: queue %q has weight %d, want 0 or more", i, q.Name, q.Weight)
		case weighted != (q.Weight > 0):
			return fmt.Errorf("kyu: WorkerConfig.Pool.Queues[%d]: queue %q has weight %d while queue %q has %d; give every queue a weight (weighted order) or none (strict order)",
				i, q.Name, q.Weight, p.Queues[0].Name, p.Queues[0].Weight)
		case q.Max < 0 || q.Max > p.Concurrency:
			return fmt.Errorf("kyu: WorkerConfig.Pool.Queues[%d]: queue %q has Max %d, want 0 (no cap) to the pool's Concurrency %d", i, q.Name, q.Max, p.Concurrency)
		}
		seen[q.Name] = true
	}
	return nil
}

// String gives the queue as logs show it: its name, then its weight and
// cap when it has them, as in "mail(weight 3, max 5)".
func (q PoolQueue) String() string {
	var extra []string
	if q.Weight != 0 {
		extra = append(extra, "weight "+strconv.Itoa(q.Weight))
	}
	if q.Max != 0 {
		extra = append(extra, "max "+strconv.Itoa(q.Max))
	}
	if len(extra) == 0 {
		return q.Name
	}
	return q.Name + "(" + strings.Join(extra, ", ") + ")"
}
