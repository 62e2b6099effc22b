package faktory_test

import (
	"context"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/memory"
	"github.com/kyuhq/kyu/server/faktory"
)

// gatedStore holds each Claim until the test lets it go.
type gatedStore struct {
	backend.Backend
	entered chan struct{}
	proceed chan struct{}
}

func (s *gatedStore) Claim(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	s.entered <- struct{}{}
	<-s.proceed
	return s.Backend.Claim(ctx, p)
}

// TestFetcherGoneReleasesJob: a job claimed for a FETCH whose client
// closed the connection meanwhile goes back to its queue at once, rather
// than staying active until its lease (30 minutes) runs out.
func TestFetcherGoneReleasesJob(t *testing.T) {
	mem := memory.New()
	t.Cleanup(func() { mem.Close() })
	store := &gatedStore{Backend: mem, entered: make(chan struct{}), proceed: make(chan struct{})}
	l, _ := listen(t, func(c *faktory.Config) { c.Backend, c.FetchWait = store, time.Minute })
	if _, err := mem.Enqueue(t.Context(), backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{{JID: "gone-1", Type: "t"}}}); err != nil {
		t.Fatal(err)
	}
	c := hello(t, l.Addr().String(), "", map[string]any{"wid": "w1"})
	c.send("FETCH default")
	<-store.entered
	c.nc.Close()
	close(store.proceed)
	go func() {
		for range store.entered {
		}
	}()
	waitFor(t, "the job back to pending", 5*time.Second, func() bool {
		j, err := mem.Get(t.Context(), backend.GetParams{JID: "gone-1"})
		if err != nil {
			t.Fatal(err)
		}
		// Claimed, then released: pending again, the attempt recorded
		// as interrupted.
		return j.State == backend.StatePending && len(j.Errors) == 1 && j.Errors[0].Kind == backend.AttemptInterrupted
	})
}

// TestFetchersServedInOrder: fetchers of one worker waiting together get
// one job each, the first to come the first job, and a queue listed first
// is drained first.
func TestFetchersServedInOrder(t *testing.T) {
	l, _ := listen(t, func(c *faktory.Config) { c.FetchWait = 5 * time.Second })
	addr := l.Addr().String()
	a := hello(t, addr, "", map[string]any{"wid": "w1"})
	b := hello(t, addr, "", map[string]any{"wid": "w1"})
	p := hello(t, addr, "", nil)
	pushB(t, p, jobJSON("o-1", "t", map[string]any{"queue": "lo"}), jobJSON("o-2", "t", map[string]any{"queue": "hi"}))
	ja := a.cmd("FETCH", "hi lo").job(t)
	jb := b.cmd("FETCH", "hi lo").job(t)
	if ja["jid"] != "o-2" || jb["jid"] != "o-1" {
		t.Fatalf("fetched %v then %v, want o-2 (queue hi) then o-1", ja["jid"], jb["jid"])
	}
	// Two waiting at once, two jobs pushed together: one each.
	a.send("FETCH hi")
	b.send("FETCH hi")
	pushB(t, p, jobJSON("o-3", "t", map[string]any{"queue": "hi"}), jobJSON("o-4", "t", map[string]any{"queue": "hi"}))
	got := map[any]bool{a.read().job(t)["jid"]: true, b.read().job(t)["jid"]: true}
	if !got["o-3"] || !got["o-4"] {
		t.Fatalf("two waiting fetchers got %v, want o-3 and o-4", got)
	}
}

// pushB pushes jobs with PUSHB and expects every one taken.
func pushB(t *testing.T, c *fwp, jobs ...map[string]any) {
	t.Helper()
	if a := c.cmd("PUSHB", jobs); string(a.bulk) != "{}" {
		t.Fatalf("PUSHB answered %c%s %s", a.kind, a.text, a.bulk)
	}
}

// aheadOne sets up a job claimed ahead: worker w1's connection a fetches
// and ACKs a-1, then fetches again, as a busy fetcher: the group claims
// a-2 for it and a-3 ahead, into its buffer. It returns a (holding a-2)
// and the store.
func aheadOne(t *testing.T) (*faktory.Listener, backend.Backend, *fwp) {
	t.Helper()
	l, store := listen(t, func(c *faktory.Config) { c.FetchWait = time.Second })
	faktory.SetAheadWindow(l, time.Hour)
	addr := l.Addr().String()
	p := hello(t, addr, "", nil)
	pushB(t, p, jobJSON("a-1", "t", map[string]any{"reserve_for": 600}), jobJSON("a-2", "t", map[string]any{"reserve_for": 600}),
		jobJSON("a-3", "t", map[string]any{"reserve_for": 600}), jobJSON("a-4", "t", map[string]any{"reserve_for": 600}))
	a := hello(t, addr, "", map[string]any{"wid": "w1"})
	j := a.cmd("FETCH", "default").job(t)
	a.cmd("ACK", map[string]any{"jid": j["jid"]}).ok(t)
	if j := a.cmd("FETCH", "default").job(t); j["jid"] != "a-2" {
		t.Fatalf("second FETCH got %v, want a-2", j["jid"])
	}
	// a-3 waits in the buffer, claimed with a short lease; a-4 is pending.
	j3 := getJob(t, store, "a-3")
	if j3.State != backend.StateActive || j3.LeaseExpiresAt.Sub(j3.StartedAt) > 30*time.Second {
		t.Fatalf("a-3 is %s, lease %v from its claim; want claimed ahead for at most 30s", j3.State, j3.LeaseExpiresAt.Sub(j3.StartedAt))
	}
	if j4 := getJob(t, store, "a-4"); j4.State != backend.StatePending {
		t.Fatalf("a-4 is %s, want pending", j4.State)
	}
	return l, store, a
}

// getJob reads the job with jid.
func getJob(t *testing.T, store backend.Backend, jid string) *backend.Job {
	t.Helper()
	j, err := store.Get(t.Context(), backend.GetParams{JID: jid})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// leaseLeft is how long jid's lease runs from now.
func leaseLeft(t *testing.T, store backend.Backend, jid string) time.Duration {
	return time.Until(getJob(t, store, jid).LeaseExpiresAt)
}

// TestFetchFromBuffer: a FETCH takes the job claimed ahead, and its
// lease, short while it waited, is extended to its reserve_for just
// after.
func TestFetchFromBuffer(t *testing.T) {
	l, store, _ := aheadOne(t)
	b := hello(t, l.Addr().String(), "", map[string]any{"wid": "w1"})
	if j := b.cmd("FETCH", "default").job(t); j["jid"] != "a-3" {
		t.Fatalf("FETCH got %v, want a-3 from the buffer", j["jid"])
	}
	waitFor(t, "a-3's lease extended to reserve_for", 5*time.Second, func() bool {
		return leaseLeft(t, store, "a-3") > 590*time.Second
	})
	b.cmd("ACK", map[string]any{"jid": "a-3"}).ok(t)
}

// TestBufferedJobsRecoveredAfterCrash: a server that stops without
// releasing its buffer (a crash) leaves the jobs to lease recovery after
// the short lease, and another server runs them; the jobs handed out
// keep their reserve_for.
func TestBufferedJobsRecoveredAfterCrash(t *testing.T) {
	_, store, _ := aheadOne(t)
	waitFor(t, "a-2's lease extended to reserve_for", 5*time.Second, func() bool {
		return leaseLeft(t, store, "a-2") > 590*time.Second
	})
	// The first server is left as it is, as if it had died; the
	// maintainer recovers expired leases a little after 30 seconds.
	res, err := store.RecoverLeases(t.Context(), backend.MaintenanceParams{Now: time.Now().Add(31 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 1 {
		t.Fatalf("recovered %d leases, want 1 (a-3)", res.Moved)
	}
	l2, err := faktory.New(faktory.Config{Backend: store, Addr: "127.0.0.1:0", FetchWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l2.Shutdown(context.Background()) })
	c := hello(t, l2.Addr().String(), "", map[string]any{"wid": "w2"})
	for _, want := range []string{"a-3", "a-4"} {
		j := c.cmd("FETCH", "default").job(t)
		if j["jid"] != want {
			t.Fatalf("FETCH got %v, want %s", j["jid"], want)
		}
		c.cmd("ACK", map[string]any{"jid": want}).ok(t)
	}
}

// TestShutdownReleasesBuffer: Shutdown hands the jobs claimed ahead back
// to their queue before it returns.
func TestShutdownReleasesBuffer(t *testing.T) {
	l, store, _ := aheadOne(t)
	if err := l.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if j := getJob(t, store, "a-3"); j.State != backend.StatePending {
		t.Fatalf("after Shutdown a-3 is %s, want pending", j.State)
	}
}

// TestPauseReleasesBuffer: pausing a queue over FWP hands its jobs
// claimed ahead back before it answers, and FETCH gets none.
func TestPauseReleasesBuffer(t *testing.T) {
	l, store, a := aheadOne(t)
	p := hello(t, l.Addr().String(), "", nil)
	p.cmd("QUEUE", "PAUSE default").ok(t)
	if j := getJob(t, store, "a-3"); j.State != backend.StatePending {
		t.Fatalf("after QUEUE PAUSE a-3 is %s, want pending", j.State)
	}
	if r := a.cmd("FETCH", "default"); r.kind != '$' || r.bulk != nil {
		t.Fatalf("FETCH of a paused queue answered %c%s %s", r.kind, r.text, r.bulk)
	}
}

// TestLastConnectionReleasesBuffer: when the group's last connection
// closes, the jobs claimed ahead for it go back at once.
func TestLastConnectionReleasesBuffer(t *testing.T) {
	_, store, a := aheadOne(t)
	a.nc.Close()
	waitFor(t, "a-3 back to pending", 5*time.Second, func() bool {
		return getJob(t, store, "a-3").State == backend.StatePending
	})
}

// TestStaleBufferReleased: a job claimed ahead that no FETCH takes within
// a second goes back, and none is claimed ahead in its place.
func TestStaleBufferReleased(t *testing.T) {
	_, store, _ := aheadOne(t)
	waitFor(t, "a-3 back to pending", 5*time.Second, func() bool {
		return getJob(t, store, "a-3").State == backend.StatePending
	})
	// The release wakes the claimer; it must not claim again for a
	// fetcher that is no longer busy.
	time.Sleep(200 * time.Millisecond)
	for _, jid := range []string{"a-3", "a-4"} {
		if j := getJob(t, store, jid); j.State != backend.StatePending {
			t.Fatalf("%s is %s after the buffer went stale, want pending", jid, j.State)
		}
	}
}
