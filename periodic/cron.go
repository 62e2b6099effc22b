package periodic

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// cronSpec is a cron expression read in a fixed location.
type cronSpec struct {
	s *cron.SpecSchedule
}

// newCronParser builds the parser for cron expressions: seconds optional,
// descriptors allowed. It is built per call; the package keeps no state.
func newCronParser() cron.Parser {
	return cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
}

// parseCron parses a cron expression or descriptor (without its time-zone
// prefix) and fixes its location: the named zone, or UTC when none is named.
func parseCron(spec, body, zone string, hasZone bool) (_ Spec, err error) {
	loc := time.UTC
	if hasZone {
		switch zone {
		case "":
			return nil, &SpecError{Spec: spec, Reason: "empty time zone"}
		case "Local":
			return nil, &SpecError{Spec: spec, Reason: "the time zone Local differs between processes; name the zone, such as Europe/Paris"}
		}
		l, lerr := time.LoadLocation(zone)
		if lerr != nil {
			return nil, &SpecError{Spec: spec, Reason: fmt.Sprintf("unknown time zone %q", zone), Err: lerr}
		}
		loc = l
	}
	defer func() {
		// The parser is third-party code fed with user input: a panic in
		// it is a spec that does not parse, not a crash.
		if r := recover(); r != nil {
			err = &SpecError{Spec: spec, Reason: fmt.Sprintf("does not parse: %v", r)}
		}
	}()
	parsed, perr := newCronParser().Parse(body)
	if perr != nil {
		return nil, &SpecError{Spec: spec, Reason: perr.Error(), Err: perr}
	}
	s, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		// Only @every gives another type, and ParseSpec handles it itself.
		return nil, &SpecError{Spec: spec, Reason: fmt.Sprintf("unsupported schedule type %T", parsed)}
	}
	s.Location = loc
	c := cronSpec{s: s}
	if c.Next(time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, &SpecError{Spec: spec, Reason: "matches no time (a date such as February 30?)"}
	}
	return c, nil
}

// Next returns the first tick strictly after after.
func (c cronSpec) Next(after time.Time) time.Time {
	return c.s.Next(after)
}

// Prev returns the latest tick at or before t. It finds the smallest
// look-back window (lo, t] that holds a tick, then bisects it with Next:
// the latest tick is Next(lo) once no whole second lies between lo and the
// point from which Next passes t.
func (c cronSpec) Prev(t time.Time) time.Time {
	before := func(x time.Time) bool { // a tick in (x, t]?
		n := c.s.Next(x)
		return !n.IsZero() && !n.After(t)
	}
	// The look-back windows, tried in turn; the smallest that holds a tick
	// is searched.
	windows := [...]time.Duration{
		time.Minute,
		time.Hour,
		24 * time.Hour,
		32 * 24 * time.Hour,
		366 * 24 * time.Hour,
		5 * 365 * 24 * time.Hour,
	}
	for _, w := range windows {
		lo, hi := t.Add(-w), t // before(lo) to be shown; !before(hi) always
		if !before(lo) {
			continue
		}
		for hi.Sub(lo) > time.Second {
			mid := lo.Add(hi.Sub(lo) / 2)
			if before(mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
		last := c.s.Next(lo)
		for { // at most one step: ticks fall on whole seconds
			n := c.s.Next(last)
			if n.IsZero() || n.After(t) {
				return last.In(t.Location())
			}
			last = n
		}
	}
	return time.Time{}
}
