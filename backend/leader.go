package backend

import (
	"context"
	"errors"
	"time"
)

// Leader elects one holder at a time per name, by a lease the holder
// renews: the store's maintainer (see MaintenanceLeadership) is elected
// this way, so that one process per store, not every worker, runs
// promotion, lease recovery and retention.
//
// The settled semantics, which backendtest checks:
//
//   - A lease is live while Now < ExpiresAt. Lead takes the lease when it
//     is not live (never taken, expired or resigned), and renews it when
//     Holder already holds it; either way it then expires at Now+TTL.
//     Otherwise it changes nothing and answers Held false with the live
//     holder's name, epoch and expiry.
//   - Epoch counts terms: each take of a lease that was not live gives one
//     more than the previous term (the first gives 1), also when the same
//     holder takes it again after it lapsed; a renewal keeps it. A holder
//     whose lease lapsed and was taken by another is refused (Held false)
//     by its next Lead, so a stale leader learns it lost before it acts
//     again.
//   - Resign ends the lease at once when Holder holds it in term Epoch,
//     so another may take it without waiting for expiry; otherwise it
//     changes nothing and is not an error.
//   - Checks. Name and Holder are non-empty text of at most
//     LeaderNameLimit bytes, TTL is positive, and Now is given (CheckNow);
//     a failed check returns a *ValidationError and changes nothing.
//
// A store whose maintenance runs elsewhere (backend/remote: its kyu
// server maintains the store behind it) answers Lead with
// ErrLeadElsewhere.
type Leader interface {
	// Lead takes or renews the lease Name for Holder, or reports who
	// holds it.
	Lead(ctx context.Context, p LeadParams) (Leadership, error)
	// Resign gives up a lease Holder holds, in term Epoch.
	Resign(ctx context.Context, p ResignParams) error
}

// MaintenanceLeadership is the name of the lease whose holder runs a
// store's maintenance (Promote, RecoverLeases, ApplyRetention).
const MaintenanceLeadership = "maintenance"

// LeaderNameLimit bounds the bytes of a lease's Name and Holder.
const LeaderNameLimit = 256

// ErrLeadElsewhere is Lead's answer on a store whose maintenance is not
// its callers' business: a caller then runs none.
var ErrLeadElsewhere = errors.New("kyu: this store is maintained elsewhere")

// LeadParams asks for the lease Name on behalf of Holder, for TTL from Now.
type LeadParams struct {
	Name   string
	Holder string
	TTL    time.Duration
	Now    time.Time
}

// Check validates p (see "Checks" on Leader).
func (p LeadParams) Check() error {
	if err := checkLeaderNames(p.Name, p.Holder); err != nil {
		return err
	}
	if p.TTL <= 0 {
		return invalid("ttl", "a lease needs a positive TTL, got %s", p.TTL)
	}
	return CheckNow(p.Now)
}

// ResignParams gives up the lease Name that Holder holds in term Epoch.
type ResignParams struct {
	Name   string
	Holder string
	Epoch  int64
	Now    time.Time
}

// Check validates p (see "Checks" on Leader).
func (p ResignParams) Check() error {
	if err := checkLeaderNames(p.Name, p.Holder); err != nil {
		return err
	}
	return CheckNow(p.Now)
}

// checkLeaderNames checks a lease's Name and Holder.
func checkLeaderNames(name, holder string) error {
	for _, f := range []struct{ field, v string }{{"name", name}, {"holder", holder}} {
		if f.v == "" || len(f.v) > LeaderNameLimit || !ValidText(f.v) {
			return invalid(f.field, "a lease's %s must be non-empty text of at most %d bytes", f.field, LeaderNameLimit)
		}
	}
	return nil
}

// Leadership is Lead's answer: whether the caller holds the lease, and
// the term and expiry of whoever holds it (zero when nobody does).
type Leadership struct {
	Held      bool
	Holder    string
	Epoch     int64
	ExpiresAt time.Time
}

// NextLeadership is the plain reading of Lead that a store applies
// atomically: given the lease as stored (zero when never taken), it
// returns the answer; when the answer is Held, the store keeps it as the
// lease.
func NextLeadership(cur Leadership, p LeadParams) Leadership {
	live := cur.Holder != "" && p.Now.Before(cur.ExpiresAt)
	switch {
	case live && cur.Holder == p.Holder:
		cur.ExpiresAt = p.Now.Add(p.TTL)
		cur.Held = true
	case live:
		cur.Held = false
	default:
		cur = Leadership{Held: true, Holder: p.Holder, Epoch: cur.Epoch + 1, ExpiresAt: p.Now.Add(p.TTL)}
	}
	return cur
}

// ResignedLeadership is the plain reading of Resign: given the lease as
// stored, it returns the lease to store and whether to store it. A
// resigned lease keeps its Epoch, so the next term counts on from it.
func ResignedLeadership(cur Leadership, p ResignParams) (Leadership, bool) {
	if cur.Holder == "" || cur.Holder != p.Holder || cur.Epoch != p.Epoch {
		return cur, false
	}
	return Leadership{Epoch: cur.Epoch}, true
}
