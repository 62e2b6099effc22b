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
