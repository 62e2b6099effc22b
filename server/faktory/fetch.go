package faktory

import (
	"context"
	"encoding/json"
	"errors"
	"net"
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

// errClientGone ends a connection whose client closed it during FETCH.
var errClientGone = errors.New("client closed the connection")

// fetch answers FETCH: the first job claimable in the queues, in the
// order given, leased for its reserve_for; or nil after FetchWait with
// none. The dispatcher claims for it, with the other fetchers of its
// worker waiting on the same queues, or takes at once a job they claimed
// ahead (its lease extended to its reserve_for just after the answer;
// see dispatcher). A worker told to quiet or stop gets
// nil after the wait, as it should fetch no more. A job claimed for a
// fetcher that is gone (its client closed the connection, or shutdown)
// goes back to its queue at once.
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
	g, w, job := c.l.fetches.wait(&c.member, c.wid, queues)
	if job != nil {
		return c.answerJob(job)
	}
	gone, unwatch := c.watchGone()
	var a fetchAnswer
	select {
	case a = <-w.ch:
	case <-wait.C:
		// A job handed at this very moment is still served.
		a, _ = c.l.fetches.leave(g, w)
	case <-c.l.stopping:
		if a, ok := c.l.fetches.leave(g, w); ok && a.job != nil {
			c.l.releaseJobs([]*backend.Job{a.job}, c.wid)
		}
		unwatch()
		return c.out.bulk(nil)
	case <-gone:
		if a, ok := c.l.fetches.leave(g, w); ok && a.job != nil {
			c.l.releaseJobs([]*backend.Job{a.job}, c.wid)
		}
		unwatch()
		return errClientGone
	}
	if !unwatch() {
		if a.job != nil {
			c.l.releaseJobs([]*backend.Job{a.job}, c.wid)
		}
		return errClientGone
	}
	if a.err != nil {
		return c.out.err("ERR", "FETCH: "+errText(a.err))
	}
	if a.job == nil {
		return c.out.bulk(nil)
	}
	return c.answerJob(a.job)
}

// answerJob answers FETCH with job; one that cannot be rendered goes back
// to its queue.
func (c *conn) answerJob(job *backend.Job) error {
	b, err := json.Marshal(wireOf(job))
	if err != nil {
		c.l.releaseJobs([]*backend.Job{job}, c.wid)
		return c.out.err("ERR", "FETCH: "+err.Error())
	}
	return c.out.bulk(b)
}

// watchGone watches the connection while FETCH waits: gone is closed when
// the client closes it. unwatch stops the watch and reports whether the
// client is still there. A client that sends its next command before the
// answer (pipelining) ends the watch early; the command stays buffered.
func (c *conn) watchGone() (gone <-chan struct{}, unwatch func() bool) {
	ch := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := c.in.Peek(1)
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			close(ch)
		}
	}()
	return ch, func() bool {
		c.nc.SetReadDeadline(time.Now())
		<-done
		c.nc.SetReadDeadline(time.Time{})
		select {
		case <-ch:
			return false
		default:
		}
		// The watch may have ended just before the end of the connection
		// was seen: look once more, without waiting.
		return c.in.Buffered() > 0 || !peerClosed(c.nc)
	}
}
