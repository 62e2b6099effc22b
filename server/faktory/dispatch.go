package faktory

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// dispatchMaxClaim bounds the jobs one claim takes for waiting fetchers.
const dispatchMaxClaim = 100

// dispatchIdle is how long a fetch group's claimer stays, with no fetcher
// waiting, before it ends (and drops its subscription).
const dispatchIdle = 5 * time.Second

// dispatcher serves FETCH: the fetchers of one worker (wid) waiting on
// the same queue list at the same moment are served by one Claim of
// several jobs, one job each, in the order they came. A job is claimed
// only for a fetcher that waits; one whose fetcher left meanwhile is
// released at once.
type dispatcher struct {
	l  *Listener
	wg sync.WaitGroup // the claimers

	mu     sync.Mutex
	groups map[string]*fetchGroup
}

// fetchGroup is the fetchers of one wid waiting on one queue list, and
// the goroutine (claimer) that claims for them.
type fetchGroup struct {
	key    string
	wid    string
	queues []string
	// waiters are the fetchers waiting, oldest first (under d.mu).
	waiters []*fetchWaiter
	// wake tells the claimer a fetcher came (coalescing).
	wake chan struct{}
}

// fetchWaiter is one waiting FETCH; the claimer hands it one answer.
type fetchWaiter struct {
	ch chan fetchAnswer // capacity 1
}

// fetchAnswer is a claimed job, or the claim's error.
type fetchAnswer struct {
	job *backend.Job
	err error
}

func newDispatcher(l *Listener) *dispatcher {
	return &dispatcher{l: l, groups: map[string]*fetchGroup{}}
}

// wait registers a fetcher of wid on queues, starting the group's
// claimer if none runs.
func (d *dispatcher) wait(wid string, queues []string) (*fetchGroup, *fetchWaiter) {
	key := wid + "\x00" + strings.Join(queues, " ")
	w := &fetchWaiter{ch: make(chan fetchAnswer, 1)}
	d.mu.Lock()
	g := d.groups[key]
	if g == nil {
		g = &fetchGroup{key: key, wid: wid, queues: queues, wake: make(chan struct{}, 1)}
		d.groups[key] = g
		d.wg.Add(1)
		go d.claimer(g)
	}
	g.waiters = append(g.waiters, w)
	d.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
	return g, w
}

// leave takes a fetcher that stops waiting out of its group, and returns
// the answer handed to it meanwhile, if any.
func (d *dispatcher) leave(g *fetchGroup, w *fetchWaiter) (fetchAnswer, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, x := range g.waiters {
		if x == w {
			g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
			return fetchAnswer{}, false
		}
	}
	// No longer waiting: the claimer handed it an answer.
	return <-w.ch, true
}

// claimer claims for g's fetchers while they wait: at once while a claim
// fills up, else when the store signals, at the poll interval or when a
// fetcher comes. It ends after dispatchIdle without fetchers, or at
// shutdown.
func (d *dispatcher) claimer(g *fetchGroup) {
	defer d.wg.Done()
	l := d.l
	var sub *backend.Subscription
	if s, err := l.b.Subscribe(l.ctx, backend.SubscribeParams{Queues: g.queues}); err == nil {
		sub = s
		defer func() { sub.Close() }()
	}
	timer := time.NewTimer(dispatchIdle)
	defer timer.Stop()
	for {
		d.mu.Lock()
		n := min(len(g.waiters), dispatchMaxClaim)
		d.mu.Unlock()
		full := false
		if n > 0 && g.wid != "" && l.workers.command(g.wid) != "" {
			// A worker told to quiet or stop fetches no more: its
			// waiting FETCHes answer nil, and nothing is claimed for it.
			d.answerAll(g, fetchAnswer{})
			n = 0
		} else if n > 0 && !l.isStopping() {
			jobs, err := d.claim(g, n)
			full = len(jobs) == n
			d.hand(g, jobs, err)
		}
		if full {
			continue
		}
		var signal <-chan struct{}
		wait := pollWithoutSignals
		if sub != nil {
			signal, wait = sub.C, pollWithSignals
		}
		if n == 0 {
			wait = dispatchIdle
		}
		timer.Reset(wait)
		select {
		case _, ok := <-signal:
			if !ok {
				sub.Close()
				sub = nil
			}
		case <-g.wake:
		case <-timer.C:
			if n == 0 && d.retire(g) {
				return
			}
		case <-l.stopping:
			d.mu.Lock()
			delete(d.groups, g.key)
			d.mu.Unlock()
			return
		}
		timer.Stop()
	}
}

// commanded wakes the claimers of wid's groups, which answer their
// waiting fetchers nil now that the worker was told to quiet or stop.
func (d *dispatcher) commanded(wid string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, g := range d.groups {
		if g.wid == wid {
			select {
			case g.wake <- struct{}{}:
			default:
			}
		}
	}
}

// retire ends an idle group, unless a fetcher came meanwhile.
func (d *dispatcher) retire(g *fetchGroup) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(g.waiters) > 0 {
		return false
	}
	delete(d.groups, g.key)
	return true
}

// claim takes up to n jobs from g's queues in strict order, each leased
// for its reserve_for (its timeout), and records them as run by g's
// worker.
func (d *dispatcher) claim(g *fetchGroup, n int) ([]*backend.Job, error) {
	l := d.l
	ctx := l.ctx
	now := l.cfg.Now()
	res, err := l.b.Claim(ctx, backend.ClaimParams{
		Queues: g.queues, Mode: backend.ClaimStrict, Max: n,
		Lease: backend.DefaultTimeout, WorkerID: g.wid, Now: now,
	})
	if err != nil || len(res.Jobs) == 0 {
		return nil, err
	}
	expires := make([]time.Time, len(res.Jobs))
	// Leases other than the default: one heartbeat per distinct timeout.
	byTimeout := map[time.Duration][]int{}
	for i, job := range res.Jobs {
		expires[i] = job.LeaseExpiresAt
		if job.Timeout > 0 && job.Timeout != backend.DefaultTimeout {
			byTimeout[job.Timeout] = append(byTimeout[job.Timeout], i)
		}
	}
	for extend, idx := range byTimeout {
		leases := make([]backend.Lease, len(idx))
		for k, i := range idx {
			leases[k] = backend.Lease{JobID: res.Jobs[i].ID, Token: res.Jobs[i].LeaseToken}
		}
		hb, err := l.b.Heartbeat(ctx, backend.HeartbeatParams{Leases: leases, Extend: extend, Now: now})
		if err != nil {
			l.releaseJobs(res.Jobs, g.wid)
			return nil, err
		}
		for k, i := range idx {
			expires[i] = hb.Leases[k].ExpiresAt
		}
	}
	for i, job := range res.Jobs {
		expired := l.leases.put(jidOf(job), leaseEntry{jobID: job.ID, token: job.LeaseToken, attempt: job.Attempt, wid: g.wid, expires: expires[i]}, now)
		for _, e := range expired {
			// Its worker never answered: it no longer runs the job.
			l.workers.finished(e.wid, e.jobID, true)
		}
		l.workers.fetched(g.wid, g.queues, job.ID)
	}
	return res.Jobs, nil
}

// hand gives the claimed jobs to g's fetchers, oldest first, one each,
// and releases at once those no fetcher waits for any more. An error
// goes to every fetcher waiting.
func (d *dispatcher) hand(g *fetchGroup, jobs []*backend.Job, err error) {
	if err != nil {
		d.answerAll(g, fetchAnswer{err: err})
		return
	}
	d.mu.Lock()
	k := min(len(jobs), len(g.waiters))
	for i := range k {
		g.waiters[i].ch <- fetchAnswer{job: jobs[i]}
	}
	rest := copy(g.waiters, g.waiters[k:])
	clear(g.waiters[rest:])
	g.waiters = g.waiters[:rest]
	d.mu.Unlock()
	if k < len(jobs) {
		d.l.releaseJobs(jobs[k:], g.wid)
	}
}

// answerAll gives every fetcher of g waiting the same answer: an error,
// or none (nil).
func (d *dispatcher) answerAll(g *fetchGroup, a fetchAnswer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, w := range g.waiters {
		w.ch <- a
	}
	clear(g.waiters)
	g.waiters = g.waiters[:0]
}

// releaseJobs hands claimed jobs that no fetcher took back to their
// queues, and forgets their leases.
func (l *Listener) releaseJobs(jobs []*backend.Job, wid string) {
	leases := make([]backend.Lease, len(jobs))
	for i, job := range jobs {
		l.leases.take(jidOf(job))
		l.workers.finished(wid, job.ID, false)
		leases[i] = backend.Lease{JobID: job.ID, Token: job.LeaseToken}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.ctx), 10*time.Second)
	defer cancel()
	res, err := l.b.Release(ctx, backend.ReleaseParams{Leases: leases, Now: l.cfg.Now()})
	if err == nil {
		for _, e := range res.Errors {
			if e != nil {
				err = e
				break
			}
		}
	}
	if err != nil {
		l.log.Warn("kyu faktory: release", "jobs", len(jobs), "err", err)
	}
}
