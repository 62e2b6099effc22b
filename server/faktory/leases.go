package faktory

import (
	"sync"
	"time"
)

// leaseEntry is what FETCH remembers of a job it handed out, so that ACK
// and FAIL, on any connection, act under the right lease.
type leaseEntry struct {
	jobID   string
	token   int64
	attempt int
	wid     string
	expires time.Time
}

// leases maps a jid to the lease FETCH took for it. Entries go with ACK
// and FAIL; the ones whose lease ran out (a worker that vanished) are
// swept now and then.
type leases struct {
	mu        sync.Mutex
	m         map[string]leaseEntry
	lastSweep time.Time
}

// sweepEvery is how often put looks for expired entries.
const sweepEvery = 10 * time.Second

func newLeases() *leases { return &leases{m: map[string]leaseEntry{}} }

// put remembers e for jid; now and then it also forgets the entries
// whose lease ran out, and returns them.
func (l *leases) put(jid string, e leaseEntry, now time.Time) (expired []leaseEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[jid] = e
	if now.Sub(l.lastSweep) >= sweepEvery {
		l.lastSweep = now
		for k, v := range l.m {
			if !now.Before(v.expires) {
				delete(l.m, k)
				expired = append(expired, v)
			}
		}
	}
	return expired
}

// take returns and forgets the entry of jid.
func (l *leases) take(jid string) (leaseEntry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[jid]
	if ok {
		delete(l.m, jid)
	}
	return e, ok
}

// holds reports whether jid's entry is the lease with token.
func (l *leases) holds(jid string, token int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[jid]
	return ok && e.token == token
}

// extended records that jid's lease with token now runs until expires.
func (l *leases) extended(jid string, token int64, expires time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.m[jid]; ok && e.token == token {
		e.expires = expires
		l.m[jid] = e
	}
}
