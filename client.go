package kyu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// ClientConfig configures a Client. The zero value is ready to use.
type ClientConfig struct {
	// Clock defaults to the system clock.
	Clock Clock
	// MaxPayload bounds a payload in bytes; 0 means 10 MiB.
	MaxPayload int
	// WaitPollInterval is how often Wait reads a job it waits for when no
	// signal from the store has woken it: the fallback for stores that
	// send none (WatchFinished: ErrNotSupported) and for signals lost on the
	// way. Default 1s.
	WaitPollInterval time.Duration
}

// DefaultWaitPollInterval is ClientConfig.WaitPollInterval's default.
const DefaultWaitPollInterval = time.Second

// Client enqueues, reads, waits for and manages jobs and queues. Every time
// it gives the store comes from its Clock. It is safe for concurrent use.
type Client struct {
	b   ClientBackend
	cfg ClientConfig
}

// NewClient returns a Client over b. It panics when b is nil, a
// programming error better found at construction than at the first call.
func NewClient(b ClientBackend, cfg ClientConfig) *Client {
	if b == nil {
		panic("kyu: NewClient: nil backend")
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	if cfg.WaitPollInterval <= 0 {
		cfg.WaitPollInterval = DefaultWaitPollInterval
	}
	return &Client{b: b, cfg: cfg}
}

// JobSpec describes one job to enqueue with EnqueueMany.
type JobSpec struct {
	Type    string
	Payload []byte
	EnqueueOptions
}

// EnqueueResult says what Enqueue did with one job.
type EnqueueResult struct {
	ID    string
	State State
	// Duplicate is true when the unique key was held by the job ID.
	Duplicate bool
}

// Enqueue adds one job. When its unique key is held it returns the holder's
// id in the result and an error matching ErrDuplicate.
func (c *Client) Enqueue(ctx context.Context, jobType string, payload []byte, opts EnqueueOptions) (EnqueueResult, error) {
	res, err := c.EnqueueMany(ctx, []JobSpec{{Type: jobType, Payload: payload, EnqueueOptions: opts}})
	if err != nil {
		return EnqueueResult{}, err
	}
	if res[0].Duplicate {
		return res[0], fmt.Errorf("%w: key %q in queue %q is held by job %s", ErrDuplicate, opts.UniqueKey, queueOrDefault(opts.Queue), res[0].ID)
	}
	return res[0], nil
}

// EnqueueJSON adds one job whose payload is v encoded as JSON.
func (c *Client) EnqueueJSON(ctx context.Context, jobType string, v any, opts EnqueueOptions) (EnqueueResult, error) {
	payload, err := marshalPayload(v)
	if err != nil {
		return EnqueueResult{}, err
	}
	return c.Enqueue(ctx, jobType, payload, opts)
}

// EnqueueMany adds jobs atomically: all are written, or none on error. A
// unique-key duplicate is not an error here: its result has Duplicate set.
// Bad input is reported as a *ValidationError naming the job's index and
// field, returned as it is; other errors are wrapped.
func (c *Client) EnqueueMany(ctx context.Context, jobs []JobSpec) ([]EnqueueResult, error) {
	now := c.cfg.Clock.Now()
	p := backend.EnqueueParams{Now: now, MaxPayload: c.cfg.MaxPayload, Jobs: make([]backend.NewJob, len(jobs))}
	for i, j := range jobs {
		if j.Delay < 0 {
			return nil, &ValidationError{Index: i, Field: "delay", Reason: "must not be negative"}
		}
		runAt := j.RunAt
		if runAt.IsZero() && j.Delay > 0 {
			runAt = now.Add(j.Delay)
		}
		p.Jobs[i] = backend.NewJob{
			Type: j.Type, Queue: j.Queue, Payload: j.Payload, Title: j.Title,
			Priority: j.Priority, RunAt: runAt, MaxAttempts: j.MaxAttempts,
			Timeout: j.Timeout, Deadline: j.Deadline, UniqueKey: j.UniqueKey,
			UniqueFor: j.UniqueFor, Tags: j.Tags, Metadata: j.Metadata, Retention: j.Retention,
		}
	}
	res, err := c.b.Enqueue(ctx, p)
	if err != nil {
		var verr *ValidationError
		if errors.As(err, &verr) {
			return nil, verr
		}
		return nil, fmt.Errorf("kyu: enqueue: %w", err)
	}
	out := make([]EnqueueResult, len(res.Jobs))
	for i, r := range res.Jobs {
		out[i] = EnqueueResult{ID: r.ID, State: r.State, Duplicate: r.Duplicate}
	}
	return out, nil
}

// Get returns the job with the given id, or an error matching ErrNotFound.
func (c *Client) Get(ctx context.Context, id string) (*Job, error) {
	r, err := c.b.Get(ctx, backend.GetParams{ID: id})
	if err != nil {
		return nil, jobError("get job "+id, err)
	}
	return jobFromRecord(r), nil
}

func queueOrDefault(q string) string {
	if q == "" {
		return backend.DefaultQueue
	}
	return q
}

// marshalPayload encodes v as a JSON payload.
func marshalPayload(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("kyu: encode payload: %w", err)
	}
	return b, nil
}
