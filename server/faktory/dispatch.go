package faktory

import (
	"context"
	"slices"
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

// Claiming ahead: a group keeps up to aheadMax jobs claimed before a
// FETCH asks, leased for aheadLease only (so that a crash leaves them to
// the lease recovery soon); each is released when it waited aheadMaxAge
// in the buffer.
const (
	aheadMax    = 32
	aheadLease  = 30 * time.Second
	aheadMaxAge = time.Second
	// aheadWindow sizes the buffer: it holds a job for each connection
	// of the group whose FETCH came within aheadWindow of its previous
	// one (a busy fetcher), up to aheadMax.
	aheadWindow = 100 * time.Millisecond
)

// dispatcher serves FETCH: the fetchers of one worker (wid) waiting on
// the same queue list at the same moment are served by one Claim of
// several jobs, one job each, in the order they came. While FETCHes come
// faster than a claim commits, the group also claims ahead: a few jobs
// wait in a buffer, under a short lease, and a FETCH takes one at once;
// its lease is extended to its reserve_for in the background (see
// extender). A job is handed only to a fetcher that waits; one whose
// fetcher left meanwhile, or that waited in the buffer too long, is
// released at once.
type dispatcher struct {
	l  *Listener
	wg sync.WaitGroup // the claimers
	// window is aheadWindow (tests change it).
	window time.Duration

	mu     sync.Mutex
	groups map[string]*fetchGroup
}

// fetchGroup is the fetchers of one wid waiting on one queue list, and
// the goroutine (claimer) that claims for them. Fields below key are
// under d.mu.
type fetchGroup struct {
	key    string
	wid    string
	queues []string
	// waiters are the fetchers waiting, oldest first.
	waiters []*fetchWaiter
	// buf holds the jobs claimed ahead, oldest first.
	buf []aheadJob
	// members counts the connections whose last FETCH went to the group,
	// busy those of them that are busy fetchers (counted in epoch).
	members int
	busy    int
	// epoch changes when jobs go stale in the buffer: demand fell, and
	// every member is a busy fetcher again only after its next FETCH.
	epoch int
	// wake tells the claimer a fetcher came (coalescing).
	wake chan struct{}
}

// aheadJob is a job claimed ahead, and when it was.
type aheadJob struct {
	job *backend.Job
	at  time.Time
}

// fetchMember is a connection's place in the group of its last FETCH.
type fetchMember struct {
	g     *fetchGroup
	last  time.Time // its last FETCH
	busy  bool      // counted in g.busy
	epoch int       // g.epoch when busy was set
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
	return &dispatcher{l: l, window: aheadWindow, groups: map[string]*fetchGroup{}}
}

// wait registers a fetcher of wid on queues, starting the group's
// claimer if none runs. m is the connection's place: it leaves the group
// of its previous FETCH if that is another. A job waiting in the buffer
// is handed at once: it is returned (w nil).
func (d *dispatcher) wait(m *fetchMember, wid string, queues []string) (*fetchGroup, *fetchWaiter, *backend.Job) {
	key := wid + "\x00" + strings.Join(queues, " ")
	d.mu.Lock()
	g := d.groups[key]
	if g == nil {
		g = &fetchGroup{key: key, wid: wid, queues: queues, wake: make(chan struct{}, 1)}
		d.groups[key] = g
		d.wg.Add(1)
		go d.claimer(g)
	}
	var dropped []*backend.Job
	if m.g != g {
		if m.g != nil {
			dropped = m.leaveLocked()
		}
		m.g, m.busy = g, false
		g.members++
	}
	now := time.Now()
	busy := !m.last.IsZero() && now.Sub(m.last) < d.window
	m.last = now
	if m.busy && m.epoch == g.epoch {
		g.busy--
	}
	m.busy, m.epoch = busy, g.epoch
	if busy {
		g.busy++
	}
	var job *backend.Job
	var w *fetchWaiter
	if len(g.buf) > 0 {
		job = g.buf[0].job
		rest := copy(g.buf, g.buf[1:])
		g.buf[rest] = aheadJob{}
		g.buf = g.buf[:rest]
	} else {
		w = &fetchWaiter{ch: make(chan fetchAnswer, 1)}
		g.waiters = append(g.waiters, w)
	}
	d.mu.Unlock()
	if len(dropped) > 0 {
		d.l.release(dropped)
	}
	if job != nil {
		d.handOut(g, job)
	}
	select {
	case g.wake <- struct{}{}:
	default:
	}
	return g, w, job
}

// leave takes a fetcher that stops waiting out of its group, and returns
// the answer handed to it meanwhile, if any.
func (d *dispatcher) leave(g *fetchGroup, w *fetchWaiter) (fetchAnswer, bool) {
	d.mu.Lock()
	for i, x := range g.waiters {
		if x == w {
			g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
			d.mu.Unlock()
			return fetchAnswer{}, false
		}
	}
	d.mu.Unlock()
	// No longer waiting: the claimer handed it an answer.
	return <-w.ch, true
}

// part takes a connection that ends out of the group of its last FETCH;
// the last one to go releases the jobs claimed ahead.
func (d *dispatcher) part(m *fetchMember) {
	d.mu.Lock()
	var dropped []*backend.Job
	if m.g != nil {
		dropped = m.leaveLocked()
		m.g = nil
	}
	d.mu.Unlock()
	if len(dropped) > 0 {
		d.l.release(dropped)
	}
}

// leaveLocked counts m out of its group and, when no member is left,
// empties the group's buffer and returns its jobs, to release (under
// d.mu).
func (m *fetchMember) leaveLocked() []*backend.Job {
	g := m.g
	if m.busy && m.epoch == g.epoch {
		g.busy--
	}
	m.busy = false
	g.members--
	if g.members > 0 {
		return nil
	}
	return g.takeBuffer(func(aheadJob) bool { return true })
}

// takeBuffer removes from the buffer the jobs drop says, and returns them
// (under d.mu).
func (g *fetchGroup) takeBuffer(drop func(aheadJob) bool) []*backend.Job {
	var out []*backend.Job
	g.buf = slices.DeleteFunc(g.buf, func(a aheadJob) bool {
		if drop(a) {
			out = append(out, a.job)
			return true
		}
		return false
	})
	return out
}

// paused releases the jobs of queue claimed ahead: a paused queue hands
// out nothing more.
func (d *dispatcher) paused(queue string) {
	var dropped []*backend.Job
	d.mu.Lock()
	for _, g := range d.groups {
		if slices.Contains(g.queues, queue) {
			dropped = append(dropped, g.takeBuffer(func(a aheadJob) bool { return a.job.Queue == queue })...)
		}
	}
	d.mu.Unlock()
	if len(dropped) > 0 {
		d.l.release(dropped)
	}
}

// claimer claims for g's fetchers while they wait, and ahead for the
// FETCHes to come while they come faster than a claim commits: at once
// while a claim fills up, else when the store signals, at the poll
// interval or when a fetcher comes. It releases the jobs that waited in
// the buffer aheadMaxAge, and ends after dispatchIdle without fetchers,
// or at shutdown.
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
	// fetched: the claimer woke for a FETCH.
	fetched := true
	for {
		now := time.Now()
		d.mu.Lock()
		stale := g.takeBuffer(func(a aheadJob) bool { return now.Sub(a.at) >= aheadMaxAge })
		if len(stale) > 0 {
			// Demand fell: no member is a busy fetcher until it
			// fetches again.
			g.epoch++
			g.busy = 0
		}
		// Claim for the fetchers waiting, and ahead for the busy ones
		// while FETCHes come (not for a wake-up of the store alone: a
		// job pushed while every fetcher works waits in its queue).
		n := len(g.waiters)
		if fetched || n > 0 {
			n += max(0, min(g.busy, aheadMax)-len(g.buf))
		}
		n = min(n, dispatchMaxClaim)
		var oldest time.Time
		if len(g.buf) > 0 {
			oldest = g.buf[0].at
		}
		stopping := l.isStopping()
		d.mu.Unlock()
		if len(stale) > 0 {
			l.release(stale)
		}
		full := false
		if n > 0 && g.wid != "" && l.workers.command(g.wid) != "" {
			// A worker told to quiet or stop fetches no more: its
			// waiting FETCHes answer nil, and nothing is claimed for it.
			d.answerAll(g, fetchAnswer{})
			n = 0
		} else if n > 0 && !stopping {
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
		if !oldest.IsZero() {
			wait = min(wait, max(time.Until(oldest.Add(aheadMaxAge)), time.Millisecond))
		}
		timer.Reset(wait)
		fetched = false
		select {
		case _, ok := <-signal:
			if !ok {
				sub.Close()
				sub = nil
			}
		case <-g.wake:
			fetched = true
		case <-timer.C:
			if n == 0 && oldest.IsZero() && d.retire(g) {
				return
			}
		case <-l.stopping:
			d.mu.Lock()
			delete(d.groups, g.key)
			dropped := g.takeBuffer(func(aheadJob) bool { return true })
			d.mu.Unlock()
			if len(dropped) > 0 {
				l.release(dropped)
			}
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

// retire ends an idle group, unless a fetcher came meanwhile or jobs
// wait in its buffer.
func (d *dispatcher) retire(g *fetchGroup) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(g.waiters) > 0 || len(g.buf) > 0 {
		return false
	}
	delete(d.groups, g.key)
	return true
}

// claim takes up to n jobs from g's queues in strict order, each leased
// for aheadLease; handOut extends the lease of each job handed out to
// its reserve_for.
func (d *dispatcher) claim(g *fetchGroup, n int) ([]*backend.Job, error) {
	l := d.l
	res, err := l.b.Claim(l.ctx, backend.ClaimParams{
		Queues: g.queues, Mode: backend.ClaimStrict, Max: n,
		Lease: aheadLease, WorkerID: g.wid, Now: l.cfg.Now(),
	})
	if err != nil {
		return nil, err
	}
	return res.Jobs, nil
}

// hand gives the claimed jobs to g's fetchers, oldest first, one each,
// and keeps the rest in the buffer for the FETCHes to come. An error goes
// to every fetcher waiting.
func (d *dispatcher) hand(g *fetchGroup, jobs []*backend.Job, err error) {
	if err != nil {
		d.answerAll(g, fetchAnswer{err: err})
		return
	}
	d.mu.Lock()
	k := min(len(jobs), len(g.waiters))
	served := slices.Clone(g.waiters[:k])
	rest := copy(g.waiters, g.waiters[k:])
	clear(g.waiters[rest:])
	g.waiters = g.waiters[:rest]
	var dropped []*backend.Job
	if g.members > 0 {
		at := time.Now()
		for _, job := range jobs[k:] {
			g.buf = append(g.buf, aheadJob{job: job, at: at})
		}
	} else {
		dropped = jobs[k:]
	}
	d.mu.Unlock()
	for i, w := range served {
		d.handOut(g, jobs[i])
		w.ch <- fetchAnswer{job: jobs[i]}
	}
	if len(dropped) > 0 {
		d.l.release(dropped)
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

// handOut records job as run by g's worker, and has its lease extended
// to its reserve_for, before FETCH answers with it.
func (d *dispatcher) handOut(g *fetchGroup, job *backend.Job) {
	l := d.l
	now := l.cfg.Now()
	expired := l.leases.put(jidOf(job), leaseEntry{jobID: job.ID, token: job.LeaseToken, attempt: job.Attempt, wid: g.wid, expires: job.LeaseExpiresAt}, now)
	for _, e := range expired {
		// Its worker never answered: it no longer runs the job.
		l.workers.finished(e.wid, e.jobID, true)
	}
	l.workers.fetched(g.wid, g.queues, job.ID)
	extend := job.Timeout
	if extend <= 0 {
		extend = backend.DefaultTimeout
	}
	l.extends.add(extension{jid: jidOf(job), lease: backend.Lease{JobID: job.ID, Token: job.LeaseToken}, extend: extend})
}

// releaseJobs hands claimed jobs that a fetcher got but did not take back
// to their queues, and forgets their leases.
func (l *Listener) releaseJobs(jobs []*backend.Job, wid string) {
	for _, job := range jobs {
		l.leases.take(jidOf(job))
		l.workers.finished(wid, job.ID, false)
	}
	l.release(jobs)
}

// release hands claimed jobs back to their queues.
func (l *Listener) release(jobs []*backend.Job) {
	leases := make([]backend.Lease, len(jobs))
	for i, job := range jobs {
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
