package periodic

import (
	"strings"
	"time"
)

// Spec is a parsed schedule: the instants at which it ticks.
type Spec interface {
	// Next returns the first tick strictly after after, in after's
	// location, or the zero time when there is none within five years.
	Next(after time.Time) time.Time
	// Prev returns the latest tick at or before t, in t's location, or the
	// zero time when there is none within five years before t.
	Prev(t time.Time) time.Time
}

// ParseSpec parses a cron expression (five fields, or six with seconds
// first), a descriptor such as @hourly, either optionally prefixed by
// "CRON_TZ=Area/City " or "TZ=Area/City ", or an interval "@every 5m" aligned
// to the Unix epoch. A cron expression without a time-zone prefix is read in
// UTC. A spec that does not parse gives a *SpecError.
func ParseSpec(spec string) (Spec, error) {
	text := strings.TrimSpace(spec)
	if text == "" {
		return nil, &SpecError{Spec: spec, Reason: "empty spec"}
	}
	zone, body, hasZone, err := splitZone(spec, text)
	if err != nil {
		return nil, err
	}
	if body == "@every" || strings.HasPrefix(body, "@every ") || strings.HasPrefix(body, "@every\t") {
		if hasZone {
			return nil, &SpecError{Spec: spec, Reason: "an @every interval counts from the Unix epoch and takes no time zone"}
		}
		return parseInterval(spec, body)
	}
	return parseCron(spec, body, zone, hasZone)
}

// splitZone separates a leading "CRON_TZ=zone " or "TZ=zone " from the
// expression that follows it.
func splitZone(spec, text string) (zone, body string, hasZone bool, err error) {
	var prefix string
	switch {
	case strings.HasPrefix(text, "CRON_TZ="):
		prefix = "CRON_TZ="
	case strings.HasPrefix(text, "TZ="):
		prefix = "TZ="
	default:
		return "", text, false, nil
	}
	rest := text[len(prefix):]
	i := strings.IndexAny(rest, " \t")
	if i < 0 {
		return "", "", false, &SpecError{Spec: spec, Reason: "a time-zone prefix needs an expression after it"}
	}
	zone, body = rest[:i], strings.TrimSpace(rest[i:])
	if strings.HasPrefix(body, "CRON_TZ=") || strings.HasPrefix(body, "TZ=") {
		return "", "", false, &SpecError{Spec: spec, Reason: "more than one time-zone prefix"}
	}
	return zone, body, true, nil
}
