package backend

import "time"

// Retention is how long a job is kept once it reaches a final state.
//
// The zero value, RetainDefault, keeps completed jobs 24 hours, cancelled
// jobs 7 days and failed jobs 30 days. A positive value keeps the job that
// long after it finished (a deletion time past MaxTime means never).
// RetainNone deletes the job in the same step that makes it final (a job
// that completed with a result is kept ResultGrace; see Expiry);
// RetainForever never deletes it.
type Retention time.Duration

// Special retention values.
const (
	RetainDefault Retention = 0
	RetainNone    Retention = -1
	RetainForever Retention = -2
)

// Default retention per final state.
const (
	DefaultRetentionCompleted = 24 * time.Hour
	DefaultRetentionCancelled = 7 * 24 * time.Hour
	DefaultRetentionFailed    = 30 * 24 * time.Hour
)

// RetainFor keeps a finished job for d (which must be positive).
func RetainFor(d time.Duration) Retention { return Retention(d) }

// Keep is how long a job in the final state s is kept; forever is true when
// it is never deleted. For RetainNone keep is 0.
func (r Retention) Keep(s State) (keep time.Duration, forever bool) {
	switch {
	case r == RetainForever:
		return 0, true
	case r == RetainNone:
		return 0, false
	case r > 0:
		return time.Duration(r), false
	}
	switch s {
	case StateFailed:
		return DefaultRetentionFailed, false
	case StateCancelled:
		return DefaultRetentionCancelled, false
	default:
		return DefaultRetentionCompleted, false
	}
}

// Valid reports whether r is one of the defined values.
func (r Retention) Valid() bool {
	return r >= 0 || r == RetainNone || r == RetainForever
}

// String gives "default", "none", "forever" or a duration such as "24h0m0s".
func (r Retention) String() string {
	switch r {
	case RetainDefault:
		return "default"
	case RetainNone:
		return "none"
	case RetainForever:
		return "forever"
	}
	return time.Duration(r).String()
}

// ParseRetention reads the forms String writes; "" means the default.
func ParseRetention(s string) (Retention, error) {
	switch s {
	case "", "default":
		return RetainDefault, nil
	case "none":
		return RetainNone, nil
	case "forever":
		return RetainForever, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, invalid("retention", "%q is not a positive duration, \"none\", \"forever\" or \"default\"", s)
	}
	return Retention(d), nil
}

// MarshalText writes the String form.
func (r Retention) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads the String form.
func (r *Retention) UnmarshalText(b []byte) error {
	v, err := ParseRetention(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}
