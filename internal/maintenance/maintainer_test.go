package maintenance_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/pebble"
	"github.com/kyuhq/kyu/internal/maintenance"
)

const (
	testInterval = 10 * time.Millisecond
	testLease    = time.Second
)

// process is one maintainer's view of a shared store: it counts the steps
// it runs, and can be cut off (every call fails, as for a process that
// died or lost its network) or stalled inside a step.
type process struct {
	backend.Backend
	steps atomic.Int64
	dead  atomic.Bool

	mu     sync.Mutex
	stall  chan struct{} // when set, the next step waits until it is closed
	inside chan struct{} // closed when a stalled step has begun
}

var errCutOff = errors.New("cut off")

func (p *process) Lead(ctx context.Context, lp backend.LeadParams) (backend.Leadership, error) {
	if p.dead.Load() {
		return backend.Leadership{}, errCutOff
	}
	return p.Backend.Lead(ctx, lp)
}

func (p *process) Resign(ctx context.Context, rp backend.ResignParams) error {
	if p.dead.Load() {
		return errCutOff
	}
	return p.Backend.Resign(ctx, rp)
}

func (p *process) step(ctx context.Context, run func(context.Context, backend.MaintenanceParams) (backend.MaintenanceResult, error), mp backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	if p.dead.Load() {
		return backend.MaintenanceResult{}, errCutOff
	}
	p.steps.Add(1)
	p.mu.Lock()
	stall, inside := p.stall, p.inside
	p.stall, p.inside = nil, nil
	p.mu.Unlock()
	if stall != nil {
		close(inside)
		<-stall
	}
	return run(ctx, mp)
}

func (p *process) Promote(ctx context.Context, mp backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	return p.step(ctx, p.Backend.Promote, mp)
}

func (p *process) RecoverLeases(ctx context.Context, mp backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	return p.step(ctx, p.Backend.RecoverLeases, mp)
}

func (p *process) ApplyRetention(ctx context.Context, mp backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	return p.step(ctx, p.Backend.ApplyRetention, mp)
}

// stallNext makes p's next step wait until the returned release is
// called; inside is closed once it waits.
func (p *process) stallNext() (inside <-chan struct{}, release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	stall, in := make(chan struct{}), make(chan struct{})
	p.stall, p.inside = stall, in
	return in, sync.OnceFunc(func() { close(stall) })
}

// cluster is n processes sharing one store, each running a Maintainer.
type cluster struct {
	t     *testing.T
	store backend.Backend
	procs []*process
	stops []context.CancelFunc
	dones []chan struct{}
}

func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	store, err := pebble.Open(t.TempDir(), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	c := &cluster{t: t, store: store}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i := range n {
		p := &process{Backend: store}
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan struct{})
		m := &maintenance.Maintainer{
			Backend: p, Holder: string(rune('A' + i)), Interval: testInterval, Lease: testLease,
			Now: time.Now, Log: log,
		}
		go func() { defer close(done); m.Run(ctx) }()
		c.procs, c.stops, c.dones = append(c.procs, p), append(c.stops, stop), append(c.dones, done)
	}
	t.Cleanup(c.stopAll)
	return c
}

// stop ends process i's Maintainer and waits for it to return.
func (c *cluster) stop(i int) {
	c.stops[i]()
	<-c.dones[i]
}

func (c *cluster) stopAll() {
	for i := range c.procs {
		c.stop(i)
	}
}

// running waits until exactly one process is running steps and returns
// it, failing when two run steps in the same stretch of time.
func (c *cluster) running(within time.Duration, not ...int) int {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		before := c.counts()
		time.Sleep(5 * testInterval)
		var active []int
		for i, p := range c.procs {
			if p.steps.Load() > before[i] {
				active = append(active, i)
			}
		}
		if len(active) > 1 {
			c.t.Fatalf("processes %v all ran maintenance steps within %s; want one", active, 5*testInterval)
		}
		if len(active) == 1 && !contains(not, active[0]) {
			return active[0]
		}
	}
	c.t.Fatalf("no process (other than %v) ran maintenance within %s", not, within)
	return -1
}

func (c *cluster) counts() []int64 {
	out := make([]int64, len(c.procs))
	for i, p := range c.procs {
		out[i] = p.steps.Load()
	}
	return out
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Of several processes sharing a store, one runs maintenance, and it
// keeps running it; the others stand by.
func TestMaintainerOneAtATime(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3)
	leader := c.running(5 * testLease)
	for range 3 {
		if got := c.running(5 * testLease); got != leader {
			t.Fatalf("maintenance moved from process %d to %d while both lived", leader, got)
		}
	}
}

// A leader that stops cleanly resigns: another takes over at its next
// try (Lease/3), long before the lease would have run out.
func TestMaintainerResignsOnStop(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2)
	leader := c.running(5 * testLease)
	start := time.Now()
	c.stop(leader)
	next := c.running(5*testLease, leader)
	if took := time.Since(start); took > testLease {
		t.Fatalf("process %d took over %s after the leader stopped; want within the lease (%s), as the leader resigned", next, took, testLease)
	}
}

// A leader that dies without resigning is replaced within one lease and
// one try (Lease + Lease/3), plus the test's own polling.
func TestMaintainerDeadLeaderReplaced(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2)
	leader := c.running(5 * testLease)
	start := time.Now()
	c.procs[leader].dead.Store(true)
	next := c.running(5*testLease, leader)
	if took := time.Since(start); took > testLease+testLease/3+20*testInterval {
		t.Fatalf("process %d took over %s after the leader died; want within %s", next, took, testLease+testLease/3)
	}
}

// A leader that stalls past its lease, inside a step, runs no further
// step once it wakes up: another has taken over, and the stale leader's
// next Lead is refused.
func TestMaintainerStaleLeaderStops(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2)
	leader := c.running(5 * testLease)
	inside, release := c.procs[leader].stallNext()
	defer release()
	<-inside
	next := c.running(5*testLease, leader)
	release()
	before := c.procs[leader].steps.Load() // the stalled step counted as it began
	for range 3 {
		if got := c.running(5*testLease, leader); got != next {
			t.Fatalf("maintenance moved from process %d to %d", next, got)
		}
	}
	if after := c.procs[leader].steps.Load(); after != before {
		t.Fatalf("the stale leader ran %d steps after its stall; want none", after-before)
	}
}

// A store maintained elsewhere gets no maintenance call at all.
func TestMaintainerElsewhere(t *testing.T) {
	t.Parallel()
	p := &elsewhere{}
	m := &maintenance.Maintainer{Backend: p, Holder: "A", Interval: testInterval, Now: time.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	done := make(chan struct{})
	go func() { defer close(done); m.Run(t.Context()) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run goes on over a store maintained elsewhere; want it to return")
	}
	if p.calls.Load() != 1 {
		t.Fatalf("the store got %d calls; want the one Lead", p.calls.Load())
	}
}

// elsewhere is a store whose Lead answers ErrLeadElsewhere; any other
// call panics (the embedded Backend is nil).
type elsewhere struct {
	backend.Backend
	calls atomic.Int64
}

func (e *elsewhere) Lead(context.Context, backend.LeadParams) (backend.Leadership, error) {
	e.calls.Add(1)
	return backend.Leadership{}, backend.ErrLeadElsewhere
}
