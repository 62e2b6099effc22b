package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// Store is what a Maintainer needs of its store: the maintenance steps,
// and the lease that elects one maintainer.
type Store interface {
	backend.Maintainer
	backend.Leader
}

// Maintainer runs a store's maintenance while it holds the store's
// maintenance lease (backend.MaintenanceLeadership), and stands by
// otherwise. The zero value is not usable; fill the exported fields.
//
// The protocol:
//
//   - A standby asks for the lease (Lead) every Lease/3; so a leader that
//     dies without resigning is replaced within Lease+Lease/3.
//   - The holder runs a round of the three steps every Interval, each
//     step repeated while it reports Limit jobs, and renews the lease
//     every Lease/3 (sooner when its clock says the lease ran out).
//   - The holder acts only while its lease is live by its last Lead
//     answer: before each step call it checks Now < ExpiresAt, so a
//     holder that stalled past its lease stops before its next call, and
//     its next Lead, refused once another took over, makes it a standby.
//     A step call already under way when the lease runs out may overlap
//     the new holder's first round; that is harmless, since every step is
//     safe to run from several processes at once (the suite checks each
//     step's results on repeat).
//   - On a store whose maintenance runs elsewhere (Lead answers
//     backend.ErrLeadElsewhere: backend/remote) it runs nothing at all.
//   - When Run's context ends, the holder resigns, so a standby takes
//     over at its next try instead of waiting out the lease.
type Maintainer struct {
	// Backend is the store: its maintenance steps and its leases.
	Backend Store
	// Holder names this process in the lease: a worker's id.
	Holder string
	// Interval is the time between rounds.
	Interval time.Duration
	// Lease is the lease's TTL; zero means LeaseFor(Interval).
	Lease time.Duration
	// Now gives the times handed to the store; the loop itself runs on
	// real time.
	Now func() time.Time
	Log *slog.Logger
}

// LeaseFor is the default lease for an interval: ten rounds, at least
// three seconds, so a renewal every Lease/3 rides out a slow call.
func LeaseFor(interval time.Duration) time.Duration {
	return max(10*interval, 3*time.Second)
}

// Run elects and maintains until ctx ends.
func (m *Maintainer) Run(ctx context.Context) {
	lease := m.Lease
	if lease <= 0 {
		lease = LeaseFor(m.Interval)
	}
	tick := time.NewTicker(m.Interval)
	defer tick.Stop()
	var (
		held      backend.Leadership // the last answer that granted the lease
		lastAsked time.Time          // real time of the last Lead, zero to ask now
	)
	defer func() {
		if held.Held {
			m.resign(held)
		}
	}()
	for {
		now := m.Now()
		if lastAsked.IsZero() || time.Since(lastAsked) >= lease/3 || (held.Held && !now.Before(held.ExpiresAt)) {
			l, err := m.Backend.Lead(ctx, backend.LeadParams{Name: backend.MaintenanceLeadership, Holder: m.Holder, TTL: lease, Now: now})
			switch {
			case errors.Is(err, backend.ErrLeadElsewhere):
				m.Log.Debug("kyu: the store is maintained elsewhere; running no maintenance")
				return
			case errors.As(err, new(*backend.ValidationError)):
				m.Log.Error("kyu: running no maintenance", "error", err)
				return
			case err != nil:
				if ctx.Err() != nil {
					return
				}
				// Unknown: stop acting, ask again next tick.
				m.Log.Warn("kyu: maintenance lease", "error", err)
				held = backend.Leadership{}
			default:
				lastAsked = time.Now()
				m.changed(held, l)
				held = backend.Leadership{}
				if l.Held {
					held = l
				}
			}
		}
		if held.Held {
			m.round(ctx, held)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// changed logs a change of leadership between two Lead answers.
func (m *Maintainer) changed(was, is backend.Leadership) {
	switch {
	case is.Held && (!was.Held || was.Epoch != is.Epoch):
		m.Log.Info("kyu: maintaining the store", "epoch", is.Epoch)
	case was.Held && !is.Held:
		m.Log.Info("kyu: maintenance handed over", "to", is.Holder, "epoch", is.Epoch)
	}
}

// round runs each step once, repeating it while it reports Limit jobs,
// for as long as the lease held lasts.
func (m *Maintainer) round(ctx context.Context, held backend.Leadership) {
	for _, step := range Steps(m.Backend) {
		for ctx.Err() == nil {
			now := m.Now()
			if !now.Before(held.ExpiresAt) {
				return // the lease ran out: renew before acting again
			}
			res, err := step.Run(ctx, backend.MaintenanceParams{Now: now, Limit: Limit})
			if err != nil {
				if ctx.Err() == nil {
					m.Log.Warn("kyu: maintenance failed", "step", step.Name, "error", err)
				}
				break
			}
			if res.Moved+res.Failed+res.Cancelled > 0 {
				m.Log.Debug("kyu: maintenance", "step", step.Name, "moved", res.Moved, "failed", res.Failed, "cancelled", res.Cancelled)
			}
			if step.Work(res) < Limit {
				break
			}
		}
	}
}

// resign gives the lease up at the end of Run, within a few seconds.
func (m *Maintainer) resign(held backend.Leadership) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := m.Backend.Resign(ctx, backend.ResignParams{Name: backend.MaintenanceLeadership, Holder: m.Holder, Epoch: held.Epoch, Now: m.Now()})
	if err != nil && !errors.Is(err, backend.ErrClosed) {
		m.Log.Warn("kyu: resign the maintenance lease", "error", err)
	}
}
