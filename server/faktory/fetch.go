package faktory

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// Polling of FETCH between wake-ups: a store that signals is still
// polled now and then (signals may be missed across a reconnect), one
// that cannot signal more often.
const (
	pollWithSignals    = time.Second
	pollWithoutSignals = 100 * time.Millisecond
)

// fetch answers FETCH: the first job claimable in the queues, in the
// order given, leased for its reserve_for; or nil after FetchWait with
// none. A worker told to quiet or stop gets nil after the wait, as it
// should fetch no more, and a FETCH waiting when the command comes
// answers nil on its next wake-up.
func (c *conn) fetch(ctx context.Context, queues []string) error {
	if len(queues) == 0 {
		queues = []string{backend.DefaultQueue}
	}
	wait := time.NewTimer(c.l.cfg.FetchWait)
	defer wait.Stop()
	if c.wid != "" && c.l.workers.command(c.wid) != "" {
		select {
		case <-wait.C:
		case <-c.l.stopping:
		}
		return c.out.bulk(nil)
	}
	c.subscribe(ctx, queues)
	for {
		job, err := c.claim(ctx, queues)
		if err != nil {
			return c.out.err("ERR", "FETCH: "+errText(err))
		}
		if job != nil {
			b, err := json.Marshal(wireOf(job))
			if err != nil {
				c.release(ctx, job)
				return c.out.err("ERR", "FETCH: "+err.Error())
			}
			return c.out.bulk(b)
		}
		var signal <-chan struct{}
		poll := pollWithoutSignals
		if c.sub != nil {
			signal, poll = c.sub.C, pollWithSignals
		}
		pollTimer := time.NewTimer(poll)
		select {
		case _, ok := <-signal:
			if !ok {
				c.sub.Close()
				c.sub = nil
			}
		case <-pollTimer.C:
		case <-wait.C:
			pollTimer.Stop()
			return c.out.bulk(nil)
		case <-c.l.stopping:
			pollTimer.Stop()
			return c.out.bulk(nil)
		}
		pollTimer.Stop()
		// Told to quiet or stop while this FETCH waited (the BEAT came on
		// another connection): a job handed out now could reach a worker
		// that takes no more, and stay leased to it until its
		// reserve_for ran out.
		if c.wid != "" && c.l.workers.command(c.wid) != "" {
			return c.out.bulk(nil)
		}
		// A client that went away while its FETCH waited (killed, its
		// host lost) would have the job leased to no one until its
		// reserve_for ran out.
		if c.peerGone() {
			return errPeerGone
		}
	}
}

// errPeerGone ends a connection whose client closed it while a FETCH
// waited.
var errPeerGone = errors.New("client closed the connection")

// peerGoneWait is how long peerGone waits for the connection to say it
// is closed; a live idle connection costs that much per check.
const peerGoneWait = time.Millisecond

// peerGone reports whether the client has closed the connection: a read
// that barely waits meets the end of the stream or an error other than
// its timeout. Bytes the client sent ahead stay buffered for the next
// command.
func (c *conn) peerGone() bool {
	if c.in.Buffered() > 0 {
		return false
	}
	c.nc.SetReadDeadline(time.Now().Add(peerGoneWait))
	_, err := c.in.Peek(1)
	c.nc.SetReadDeadline(time.Time{})
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

// subscribe keeps a wake-up subscription for the queues FETCH asks for;
// a store that cannot signal leaves c.sub nil, and FETCH polls.
func (c *conn) subscribe(ctx context.Context, queues []string) {
	key := strings.Join(queues, " ")
	if c.sub != nil && c.subQueues == key {
		return
	}
	if c.sub != nil {
		c.sub.Close()
		c.sub = nil
	}
	sub, err := c.l.b.Subscribe(ctx, backend.SubscribeParams{Queues: queues})
	if err != nil {
		return
	}
	c.sub, c.subQueues = sub, key
}

// claim takes one job from the queues in strict order and sets its lease
// to the job's reserve_for (its timeout); nil when none is claimable.
func (c *conn) claim(ctx context.Context, queues []string) (*backend.Job, error) {
	now := c.l.cfg.Now()
	res, err := c.l.b.Claim(ctx, backend.ClaimParams{
		Queues: queues, Mode: backend.ClaimStrict, Max: 1,
		Lease: backend.DefaultTimeout, WorkerID: c.wid, Now: now,
	})
	if err != nil || len(res.Jobs) == 0 {
		return nil, err
	}
	job := res.Jobs[0]
	expires := job.LeaseExpiresAt
	if job.Timeout > 0 && job.Timeout != backend.DefaultTimeout {
		hb, err := c.l.b.Heartbeat(ctx, backend.HeartbeatParams{
			Leases: []backend.Lease{{JobID: job.ID, Token: job.LeaseToken}}, Extend: job.Timeout, Now: now,
		})
		if err != nil {
			return nil, err
		}
		expires = hb.Leases[0].ExpiresAt
	}
	jid := job.JID
	if jid == "" {
		jid = job.ID
	}
	expired := c.l.leases.put(jid, leaseEntry{jobID: job.ID, token: job.LeaseToken, attempt: job.Attempt, wid: c.wid, expires: expires}, now)
	for _, e := range expired {
		// Its worker never answered: it no longer runs the job.
		c.l.workers.finished(e.wid, e.jobID, true)
	}
	c.l.workers.fetched(c.wid, queues, job.ID)
	return job, nil
}

// release hands a claimed job that could not be sent back to its queue.
func (c *conn) release(ctx context.Context, job *backend.Job) {
	jid := job.JID
	if jid == "" {
		jid = job.ID
	}
	c.l.leases.take(jid)
	c.l.workers.finished(c.wid, job.ID, false)
	_, err := c.l.b.Release(ctx, backend.ReleaseParams{Leases: []backend.Lease{{JobID: job.ID, Token: job.LeaseToken}}, Now: c.l.cfg.Now()})
	if err != nil {
		c.l.log.Warn("kyu faktory: release", "id", job.ID, "err", err)
	}
}
