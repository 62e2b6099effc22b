package faktory

import (
	"context"
	"errors"
	"fmt"

	"github.com/kyuhq/kyu/backend"
)

// leaseOf finds the lease under which jid runs: the one FETCH remembered,
// or, for a job fetched before a restart or through another server, the
// job's current lease in the store (jid is the job's JID, or its kyu id
// for a job enqueued without one).
func (c *conn) leaseOf(ctx context.Context, jid string) (leaseEntry, error) {
	if e, ok := c.l.leases.take(jid); ok {
		return e, nil
	}
	job, err := c.l.b.Get(ctx, backend.GetParams{JID: jid})
	if errors.Is(err, backend.ErrNotFound) {
		job, err = c.l.b.Get(ctx, backend.GetParams{ID: jid})
	}
	if err != nil {
		var ve *backend.ValidationError
		if errors.Is(err, backend.ErrNotFound) || errors.As(err, &ve) {
			return leaseEntry{}, fmt.Errorf("no job with jid %s", jid)
		}
		return leaseEntry{}, err
	}
	if job.State != backend.StateActive {
		return leaseEntry{}, fmt.Errorf("job %s is not running: it is %s", jid, job.State)
	}
	return leaseEntry{jobID: job.ID, token: job.LeaseToken, attempt: job.Attempt, wid: job.WorkerID}, nil
}

// ack answers ACK: the job completes, in one store call with the ACKs
// of other connections that come at the same time.
func (c *conn) ack(ctx context.Context, jid string) error {
	e, err := c.leaseOf(ctx, jid)
	if err != nil {
		return c.out.err("ERR", "ACK: "+errText(err))
	}
	err = c.l.acks.do(ctx, backend.CompleteItem{Lease: backend.Lease{JobID: e.jobID, Token: e.token}})
	c.l.workers.finished(e.wid, e.jobID, false)
	if err != nil {
		return c.out.err("ERR", "ACK "+jid+": "+errText(err))
	}
	return c.out.ok()
}

// failJob answers FAIL: the attempt fails with "errtype: message" and the
// backtrace as its stack, and the job retries after kyu's backoff while it
// has attempts left. FAILs coming together share a store call.
func (c *conn) failJob(ctx context.Context, f failArgs) error {
	e, err := c.leaseOf(ctx, f.JID)
	if err != nil {
		return c.out.err("ERR", "FAIL: "+errText(err))
	}
	now := c.l.cfg.Now()
	message, stack := failMessage(f)
	err = c.l.fails.do(ctx, backend.FailItem{
		Lease:   backend.Lease{JobID: e.jobID, Token: e.token},
		Message: message, Stack: stack,
		RetryAt: c.l.cfg.RetryAt(now, e.attempt, errors.New(message)),
	})
	c.l.workers.finished(e.wid, e.jobID, true)
	if err != nil {
		return c.out.err("ERR", "FAIL "+f.JID+": "+errText(err))
	}
	return c.out.ok()
}

// beat answers BEAT: +OK, or the state the operator asked for (quiet or
// terminate) as Faktory's clients expect it.
func (c *conn) beat(ctx context.Context, b beatArgs) error {
	cmd, err := c.l.workers.beat(ctx, b, c.l.cfg.Now())
	if err != nil {
		return c.out.err("ERR", "BEAT: "+errText(err))
	}
	if cmd != "" {
		c.l.fetches.commanded(b.WID)
	}
	switch cmd {
	case backend.CommandQuiet:
		return c.out.bulk([]byte(`{"state":"quiet"}`))
	case backend.CommandStop:
		return c.out.bulk([]byte(`{"state":"terminate"}`))
	}
	return c.out.ok()
}
