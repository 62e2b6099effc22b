package kyu

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// Wait blocks until the job is finished (completed, failed or cancelled)
// and returns it, with its Result when it completed with one. It is woken
// by the store's signal when the job ends, and reads the job every
// ClientConfig.WaitPollInterval besides, for stores without signals.
//
// Wait returns an error matching ErrNotFound when no job has the id, and
// also when the job is deleted before Wait could read it finished: by
// Delete, or by RetainNone, which deletes a job as it finishes unless it
// completed with a result (that is kept a minute for its waiter). It
// returns ctx's error (its cause), wrapped, when ctx ends first.
func (c *Client) Wait(ctx context.Context, id string) (*Job, error) {
	// Subscribe before the first read, so an end between the two is heard.
	sub, err := c.b.WatchFinished(ctx, backend.WatchParams{IDs: []string{id}})
	var signals <-chan struct{}
	switch {
	case err == nil:
		defer sub.Close()
		signals = sub.C
	case !errors.Is(err, ErrNotSupported):
		return nil, fmt.Errorf("kyu: wait for job %s: %w", id, err)
	}
	poll := time.NewTicker(c.cfg.WaitPollInterval)
	defer poll.Stop()
	seen := false
	for {
		r, err := c.b.Get(ctx, backend.GetParams{ID: id})
		switch {
		case errors.Is(err, ErrNotFound) && seen:
			return nil, fmt.Errorf("kyu: wait for job %s: it was deleted before it could be read finished (retention none?): %w", id, err)
		case err != nil && ctx.Err() != nil:
			return nil, fmt.Errorf("kyu: wait for job %s: %w", id, context.Cause(ctx))
		case err != nil:
			return nil, fmt.Errorf("kyu: wait for job %s: %w", id, err)
		case r.State.Final():
			return jobFromRecord(r), nil
		}
		seen = true
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kyu: wait for job %s: %w", id, context.Cause(ctx))
		case <-signals:
		case <-poll.C:
		}
	}
}

// EnqueueAndWait enqueues a job and waits until it is finished, for
// request/response work (Gearman's foreground jobs): the returned job
// carries the handler's Result, or the Errors of a failure. When the
// unique key is held it waits for the holder instead, so equal requests
// made at once share one run. Errors are those of Enqueue, then of Wait;
// when ctx ends first the job stays enqueued (cancel it with Cancel if it
// is no longer wanted).
func (c *Client) EnqueueAndWait(ctx context.Context, jobType string, payload []byte, opts EnqueueOptions) (*Job, error) {
	res, err := c.Enqueue(ctx, jobType, payload, opts)
	if err != nil {
		return nil, err
	}
	return c.Wait(ctx, res.ID)
}
