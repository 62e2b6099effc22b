package backendtest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// leaderTTL is the lease the leadership tests take.
const leaderTTL = 10 * time.Second

// lead asks for the test lease name on behalf of holder at f.now.
func (f *fixture) lead(name, holder string) backend.Leadership {
	f.t.Helper()
	l, err := f.b.Lead(f.ctx, backend.LeadParams{Name: name, Holder: holder, TTL: leaderTTL, Now: f.now})
	if err != nil {
		f.t.Fatalf("Lead(%s for %s): %v", name, holder, err)
	}
	return l
}

// wantLeader checks a Lead answer: held or not, whose, which term, and
// until when (zero: not checked).
func (f *fixture) wantLeader(what string, got backend.Leadership, held bool, holder string, epoch int64, expires time.Time) {
	f.t.Helper()
	if got.Held != held || got.Holder != holder || got.Epoch != epoch {
		f.t.Fatalf("%s: Lead answered held=%v holder=%q epoch=%d; want held=%v holder=%q epoch=%d",
			what, got.Held, got.Holder, got.Epoch, held, holder, epoch)
	}
	if !expires.IsZero() {
		f.wantTime(what+": ExpiresAt", got.ExpiresAt, expires)
	}
}

// startLeader is start for the leadership tests: it skips a store whose
// maintenance runs elsewhere (Lead answers backend.ErrLeadElsewhere).
func startLeader(t *testing.T, factory Factory) *fixture {
	t.Helper()
	f := start(t, factory)
	_, err := f.b.Lead(f.ctx, backend.LeadParams{Name: "probe", Holder: "probe", TTL: time.Second, Now: f.now})
	if errors.Is(err, backend.ErrLeadElsewhere) {
		t.Skip("the store is maintained elsewhere (Lead answers ErrLeadElsewhere)")
	}
	if err != nil {
		t.Fatalf("Lead: %v", err)
	}
	return f
}

func testLeader(t *testing.T, factory Factory) {
	const name = backend.MaintenanceLeadership

	t.Run("OneAtATime", func(t *testing.T) {
		f := startLeader(t, factory)
		f.wantLeader("A takes a lease never taken", f.lead(name, "A"), true, "A", 1, t0.Add(leaderTTL))
		f.advance(time.Second)
		f.wantLeader("B asks while A's lease is live", f.lead(name, "B"), false, "A", 1, t0.Add(leaderTTL))
		f.wantLeader("A renews", f.lead(name, "A"), true, "A", 1, f.now.Add(leaderTTL))
		f.at(leaderTTL)
		f.wantLeader("B asks when A's first expiry has passed but its renewal has not",
			f.lead(name, "B"), false, "A", 1, t0.Add(time.Second+leaderTTL))
		f.wantLeader("another name is another lease", f.lead(name+"-other", "B"), true, "B", 1, f.now.Add(leaderTTL))
	})

	t.Run("Race", func(t *testing.T) {
		f := startLeader(t, factory)
		const holders = 8
		answers := make([]backend.Leadership, holders)
		errs := make([]error, holders)
		var wg sync.WaitGroup
		for i := range holders {
			wg.Go(func() {
				answers[i], errs[i] = f.b.Lead(f.ctx, backend.LeadParams{Name: name, Holder: fmt.Sprint("H", i), TTL: leaderTTL, Now: f.now})
			})
		}
		wg.Wait()
		var winners []string
		for i, a := range answers {
			if errs[i] != nil {
				t.Fatalf("Lead of H%d: %v", i, errs[i])
			}
			if a.Held {
				winners = append(winners, a.Holder)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("%d holders raced for a free lease and %d were told they hold it (%v); want exactly 1", holders, len(winners), winners)
		}
		for i, a := range answers {
			if a.Holder != winners[0] || a.Epoch != 1 {
				t.Fatalf("H%d's answer names holder %q epoch %d; want the winner %q, epoch 1", i, a.Holder, a.Epoch, winners[0])
			}
		}
	})

	t.Run("DeadLeaderReplaced", func(t *testing.T) {
		f := startLeader(t, factory)
		f.lead(name, "A")
		f.at(leaderTTL - time.Millisecond)
		f.wantLeader("B asks a millisecond before A's lease ends", f.lead(name, "B"), false, "A", 1, t0.Add(leaderTTL))
		f.at(leaderTTL)
		f.wantLeader("B asks when A's lease ends", f.lead(name, "B"), true, "B", 2, f.now.Add(leaderTTL))
	})

	t.Run("StaleLeaderRefused", func(t *testing.T) {
		f := startLeader(t, factory)
		f.lead(name, "A")
		f.at(leaderTTL)
		f.lead(name, "B")
		f.advance(time.Second)
		f.wantLeader("A renews after B took over", f.lead(name, "A"), false, "B", 2, t0.Add(2*leaderTTL))
		f.mustOK("Resign of A's old term", f.b.Resign(f.ctx, backend.ResignParams{Name: name, Holder: "A", Epoch: 1, Now: f.now}))
		f.mustOK("Resign of B's term by A", f.b.Resign(f.ctx, backend.ResignParams{Name: name, Holder: "A", Epoch: 2, Now: f.now}))
		f.mustOK("Resign of B's old term", f.b.Resign(f.ctx, backend.ResignParams{Name: name, Holder: "B", Epoch: 1, Now: f.now}))
		f.wantLeader("B renews after the refused resignations", f.lead(name, "B"), true, "B", 2, f.now.Add(leaderTTL))
		f.wantLeader("A asks again", f.lead(name, "A"), false, "B", 2, time.Time{})
	})

	t.Run("Resign", func(t *testing.T) {
		f := startLeader(t, factory)
		f.lead(name, "A")
		f.advance(time.Second)
		f.mustOK("Resign", f.b.Resign(f.ctx, backend.ResignParams{Name: name, Holder: "A", Epoch: 1, Now: f.now}))
		f.wantLeader("B asks at once after A resigned", f.lead(name, "B"), true, "B", 2, f.now.Add(leaderTTL))
		f.mustOK("Resign of a lease never taken", f.b.Resign(f.ctx, backend.ResignParams{Name: "never", Holder: "A", Epoch: 1, Now: f.now}))
	})

	t.Run("RetakeAfterLapse", func(t *testing.T) {
		f := startLeader(t, factory)
		f.lead(name, "A")
		f.at(2 * leaderTTL)
		f.wantLeader("A takes its own lapsed lease: a new term", f.lead(name, "A"), true, "A", 2, f.now.Add(leaderTTL))
	})

	t.Run("Checks", func(t *testing.T) {
		f := startLeader(t, factory)
		good := backend.LeadParams{Name: name, Holder: "A", TTL: leaderTTL, Now: f.now}
		for _, c := range []struct {
			field  string
			change func(p *backend.LeadParams)
		}{
			{"name", func(p *backend.LeadParams) { p.Name = "" }},
			{"holder", func(p *backend.LeadParams) { p.Holder = "" }},
			{"holder", func(p *backend.LeadParams) { p.Holder = string(make([]byte, backend.LeaderNameLimit+1)) }},
			{"ttl", func(p *backend.LeadParams) { p.TTL = 0 }},
			{"now", func(p *backend.LeadParams) { p.Now = time.Time{} }},
		} {
			p := good
			c.change(&p)
			_, err := f.b.Lead(f.ctx, p)
			wantInvalid(t, err, -1, c.field)
		}
		err := f.b.Resign(f.ctx, backend.ResignParams{Name: name, Holder: "", Epoch: 1, Now: f.now})
		wantInvalid(t, err, -1, "holder")
		f.wantLeader("after the refused calls", f.lead(name, "B"), true, "B", 1, f.now.Add(leaderTTL))
	})
}
