package faktory

import (
	"context"
	"sync"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// extension asks for the lease of a job handed out by FETCH to run for
// its reserve_for (extend) from now.
type extension struct {
	jid    string
	lease  backend.Lease
	extend time.Duration
}

// extender extends the leases of the jobs FETCH hands out, which were
// claimed under a short lease (aheadLease), off FETCH's answer: the job
// goes out at once, and the extensions that come together commit with
// one Heartbeat per distinct reserve_for shortly after. A job ACKed or
// FAILed first needs none. A lease lost meanwhile is logged; the job's
// ACK will then fail as a lost lease, and it runs again (at least once).
// No goroutine runs while nothing waits.
type extender struct {
	l  *Listener
	wg sync.WaitGroup

	mu      sync.Mutex
	pending []extension
	busy    bool
}

// add queues x, and starts the goroutine that commits the queue if none
// runs.
func (e *extender) add(x extension) {
	e.mu.Lock()
	e.pending = append(e.pending, x)
	start := !e.busy
	e.busy = true
	e.mu.Unlock()
	if start {
		e.wg.Add(1)
		go e.run()
	}
}

// run commits the queued extensions, batch after batch, until none is
// left.
func (e *extender) run() {
	defer e.wg.Done()
	for {
		e.mu.Lock()
		batch := e.pending
		e.pending = nil
		if len(batch) == 0 {
			e.busy = false
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		e.apply(batch)
	}
}

// apply extends the leases of batch still held by a FETCH (not ACKed,
// FAILed or released meanwhile), one Heartbeat per distinct extension.
func (e *extender) apply(batch []extension) {
	l := e.l
	byExtend := map[time.Duration][]extension{}
	for _, x := range batch {
		if l.leases.holds(x.jid, x.lease.Token) {
			byExtend[x.extend] = append(byExtend[x.extend], x)
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.ctx), 10*time.Second)
	defer cancel()
	for extend, xs := range byExtend {
		leases := make([]backend.Lease, len(xs))
		for i, x := range xs {
			leases[i] = x.lease
		}
		res, err := l.b.Heartbeat(ctx, backend.HeartbeatParams{Leases: leases, Extend: extend, Now: l.cfg.Now()})
		if err != nil {
			l.log.Warn("kyu faktory: extend leases to reserve_for", "jobs", len(xs), "err", err)
			continue
		}
		for i, x := range xs {
			if i >= len(res.Leases) {
				break
			}
			s := res.Leases[i]
			if !s.Lost {
				l.leases.extended(x.jid, x.lease.Token, s.ExpiresAt)
			} else if l.leases.holds(x.jid, x.lease.Token) {
				l.log.Warn("kyu faktory: lease lost before its extension to reserve_for; the job will run again", "jid", x.jid)
			}
		}
	}
}
