package periodic

import (
	"fmt"
	"strings"
	"time"
)

// intervalSpec ticks at every whole multiple of its period since the Unix
// epoch, so processes started at different times agree on the ticks.
type intervalSpec struct {
	every int64 // seconds, at least 1
}

// parseInterval parses "@every <duration>".
func parseInterval(spec, body string) (Spec, error) {
	fields := strings.Fields(body)
	if len(fields) != 2 {
		return nil, &SpecError{Spec: spec, Reason: `want "@every <duration>", such as "@every 5m"`}
	}
	d, err := time.ParseDuration(fields[1])
	switch {
	case err != nil:
		return nil, &SpecError{Spec: spec, Reason: fmt.Sprintf("the interval %q is not a duration such as 90s or 1h30m", fields[1]), Err: err}
	case d < time.Second:
		return nil, &SpecError{Spec: spec, Reason: fmt.Sprintf("the interval %s is less than one second", d)}
	case d%time.Second != 0:
		return nil, &SpecError{Spec: spec, Reason: fmt.Sprintf("the interval %s is not a whole number of seconds", d)}
	}
	return intervalSpec{every: int64(d / time.Second)}, nil
}

// Next returns the first multiple of the interval strictly after after.
func (s intervalSpec) Next(after time.Time) time.Time {
	k := floorDiv(after.Unix(), s.every) + 1
	return time.Unix(k*s.every, 0).In(after.Location())
}

// Prev returns the latest multiple of the interval at or before t.
func (s intervalSpec) Prev(t time.Time) time.Time {
	k := floorDiv(t.Unix(), s.every)
	return time.Unix(k*s.every, 0).In(t.Location())
}

// floorDiv divides rounding toward minus infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
