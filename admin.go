package kyu

import (
	"context"
	"fmt"

	"github.com/kyuhq/kyu/backend"
)

// adminBatch is how many jobs one RetryQueue or Purge call may touch;
// RetryFailed and Purge repeat it until a call touches fewer.
const adminBatch = 1000

// QueueRetention overrides the default retention of one queue's jobs per
// final state; a job's own Retention still wins. See backend.QueueRetention.
type QueueRetention = backend.QueueRetention

// QueueSettings are a queue's persistent settings: paused or not, and its
// retention overrides.
type QueueSettings = backend.QueueSettings

// Retry sends a failed or cancelled job back to pending and returns it. Its
// attempt count is kept and its MaxAttempts raised if needed so it gets at
// least one more try. Other states give an error matching ErrWrongState;
// a unique key another job now holds, one matching ErrUniqueKeyHeld.
func (c *Client) Retry(ctx context.Context, id string) (*Job, error) {
	r, err := c.b.Retry(ctx, backend.RetryParams{ID: id, Now: c.cfg.Clock.Now()})
	if err != nil {
		return nil, jobError("retry job "+id, err)
	}
	return jobFromRecord(r), nil
}

// RunNow makes a scheduled or retry job pending at once and returns it.
// Other states give an error matching ErrWrongState.
func (c *Client) RunNow(ctx context.Context, id string) (*Job, error) {
	r, err := c.b.RunNow(ctx, backend.RunNowParams{ID: id, Now: c.cfg.Clock.Now()})
	if err != nil {
		return nil, jobError("run job "+id+" now", err)
	}
	return jobFromRecord(r), nil
}

// Delete removes a job. An active job is refused with an error matching
// ErrJobActive (cancel it first); an unknown id gives one matching
// ErrNotFound.
func (c *Client) Delete(ctx context.Context, id string) error {
	if err := c.b.Delete(ctx, backend.DeleteParams{ID: id, Now: c.cfg.Clock.Now()}); err != nil {
		return jobError("delete job "+id, err)
	}
	return nil
}

// Purge deletes every job of queue in state, oldest first, and returns how
// many it deleted. Active jobs cannot be purged (a *ValidationError): cancel
// them first. It works in batches, so on an error some jobs may already be
// gone; the count says how many.
func (c *Client) Purge(ctx context.Context, queue string, state State) (int, error) {
	n, err := repeatBatches(ctx, func(ctx context.Context) (backend.CountResult, error) {
		return c.b.Purge(ctx, backend.PurgeParams{Queue: queue, State: state, Limit: adminBatch, Now: c.cfg.Clock.Now()})
	})
	if err != nil {
		return n, fmt.Errorf("kyu: purge %s jobs of queue %q: %w", state, queue, err)
	}
	return n, nil
}

// RetryFailed retries every failed job of queue as Retry does, oldest
// first, and returns how many it retried; a job whose unique key another
// job holds is skipped. It works in batches, so on an error some jobs may
// already be retried; the count says how many.
func (c *Client) RetryFailed(ctx context.Context, queue string) (int, error) {
	n, err := repeatBatches(ctx, func(ctx context.Context) (backend.CountResult, error) {
		return c.b.RetryQueue(ctx, backend.RetryQueueParams{Queue: queue, State: StateFailed, Limit: adminBatch, Now: c.cfg.Clock.Now()})
	})
	if err != nil {
		return n, fmt.Errorf("kyu: retry failed jobs of queue %q: %w", queue, err)
	}
	return n, nil
}

// repeatBatches calls step until it touches fewer than adminBatch jobs, and
// adds up the counts.
func repeatBatches(ctx context.Context, step func(context.Context) (backend.CountResult, error)) (int, error) {
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		res, err := step(ctx)
		if err != nil {
			return total, err
		}
		total += res.Count
		if res.Count < adminBatch {
			return total, nil
		}
	}
}

// PauseQueue stops workers from claiming the queue's jobs: jobs are still
// enqueued and promoted, and running ones finish. It returns the queue's
// settings. A queue needs no creation, and the setting persists.
func (c *Client) PauseQueue(ctx context.Context, queue string) (QueueSettings, error) {
	return c.updateQueue(ctx, "pause", backend.UpdateQueueParams{Queue: queue, Paused: new(true)})
}

// ResumeQueue lets workers claim the queue's jobs again, and wakes them.
func (c *Client) ResumeQueue(ctx context.Context, queue string) (QueueSettings, error) {
	return c.updateQueue(ctx, "resume", backend.UpdateQueueParams{Queue: queue, Paused: new(false)})
}

// SetQueueRetention sets the queue's retention overrides, per final state
// (RetainDefault leaves a state's default alone). They apply to jobs that
// finish afterwards; a job's own Retention still wins.
func (c *Client) SetQueueRetention(ctx context.Context, queue string, r QueueRetention) (QueueSettings, error) {
	return c.updateQueue(ctx, "set retention of", backend.UpdateQueueParams{Queue: queue, Retention: &r})
}

func (c *Client) updateQueue(ctx context.Context, op string, p backend.UpdateQueueParams) (QueueSettings, error) {
	p.Now = c.cfg.Clock.Now()
	s, err := c.b.UpdateQueue(ctx, p)
	if err != nil {
		return QueueSettings{}, fmt.Errorf("kyu: %s queue %q: %w", op, p.Queue, err)
	}
	return s, nil
}
