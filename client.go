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

// defaultWaitPollInterval is ClientConfig.WaitPollInterval's default.
const defaultWaitPollInterval = time.Second

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
		cfg.WaitPollInterval = defaultWaitPollInterval
	}
	return &Client{b: b, cfg: cfg}
}

// JobSpec describes one job to enqueue with EnqueueMany.
type JobSpec struct {
	Type    string
	Payload []byte
	EnqueueOptions
}

// JSONJobSpec describes one job to enqueue with EnqueueManyJSON: its
// Payload is encoded as JSON.
type JSONJobSpec struct {
	Type    string
	Payload any
	EnqueueOptions
}

// EnqueueResult says what an enqueue did with one job.
type EnqueueResult struct {
	ID    string
	State State
	// Duplicate is true when the job's unique key was held: nothing was
	// written, and ID and State are the holder's. It is an outcome, not an
	// error, the same for every enqueue method.
	Duplicate bool
}

// Enqueue adds one job. When its unique key is held nothing is written
// and the result, with a nil error, has Duplicate set and the holder's id.
// Bad input is reported as a *ValidationError naming the field, returned
// as it is; other errors are wrapped.
func (c *Client) Enqueue(ctx context.Context, jobType string, payload []byte, opts EnqueueOptions) (EnqueueResult, error) {
	res, err := c.EnqueueMany(ctx, []JobSpec{{Type: jobType, Payload: payload, EnqueueOptions: opts}})
	if err != nil {
		return EnqueueResult{}, err
	}
	return res[0], nil
}

// EnqueueJSON adds one job whose payload is v encoded as JSON, as Enqueue
// does.
func (c *Client) EnqueueJSON(ctx context.Context, jobType string, v any, opts EnqueueOptions) (EnqueueResult, error) {
	payload, err := marshalPayload(v)
	if err != nil {
		return EnqueueResult{}, err
	}
	return c.Enqueue(ctx, jobType, payload, opts)
}

// EnqueueMany adds jobs atomically: all are written, or none on error. A
// job whose unique key is held is reported as Enqueue reports it: its
// result has Duplicate set, and the others are written. Bad input is
// reported as a *ValidationError naming the job's index and field,
// returned as it is; other errors are wrapped.
func (c *Client) EnqueueMany(ctx context.Context, jobs []JobSpec) ([]EnqueueResult, error) {
	return c.enqueue(ctx, jobs, "enqueue", c.b.Enqueue)
}

// EnqueueManyJSON adds jobs whose payloads are encoded as JSON, as
// EnqueueMany does. A payload that cannot be encoded fails the call, and
// nothing is written.
func (c *Client) EnqueueManyJSON(ctx context.Context, jobs []JSONJobSpec) ([]EnqueueResult, error) {
	specs, err := encodeSpecs(jobs)
	if err != nil {
		return nil, err
	}
	return c.EnqueueMany(ctx, specs)
}

// enqueue writes jobs with write, the store's Enqueue or its enqueue in a
// caller's transaction; op names the call in errors.
func (c *Client) enqueue(ctx context.Context, jobs []JobSpec, op string, write func(context.Context, backend.EnqueueParams) (backend.EnqueueResult, error)) ([]EnqueueResult, error) {
	now := c.cfg.Clock.Now()
	p := backend.EnqueueParams{Now: now, MaxPayload: c.cfg.MaxPayload, Jobs: make([]backend.NewJob, len(jobs))}
	for i, j := range jobs {
		nj, verr := j.EnqueueOptions.newJob(j.Type, j.Payload, now)
		if verr != nil {
			verr.Index = i
			return nil, verr
		}
		p.Jobs[i] = nj
	}
	res, err := write(ctx, p)
	if err != nil {
		var verr *ValidationError
		if errors.As(err, &verr) {
			return nil, verr
		}
		return nil, fmt.Errorf("kyu: %s: %w", op, err)
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

// GetByJID returns the job enqueued with EnqueueOptions.JID jid, or an
// error matching ErrNotFound.
func (c *Client) GetByJID(ctx context.Context, jid string) (*Job, error) {
	r, err := c.b.Get(ctx, backend.GetParams{JID: jid})
	if err != nil {
		return nil, jobError("get job with jid "+jid, err)
	}
	return jobFromRecord(r), nil
}

// marshalPayload encodes v as a JSON payload.
func marshalPayload(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("kyu: encode payload: %w", err)
	}
	return b, nil
}

// encodeSpecs turns JSON job specs into JobSpecs, encoding each payload.
func encodeSpecs(jobs []JSONJobSpec) ([]JobSpec, error) {
	specs := make([]JobSpec, len(jobs))
	for i, j := range jobs {
		b, err := json.Marshal(j.Payload)
		if err != nil {
			return nil, fmt.Errorf("kyu: encode payload of job %d: %w", i, err)
		}
		specs[i] = JobSpec{Type: j.Type, Payload: b, EnqueueOptions: j.EnqueueOptions}
	}
	return specs, nil
}
