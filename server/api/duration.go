package api

import (
	"fmt"
	"time"
)

// Duration is a time.Duration written as a Go duration string ("1m30s").
type Duration time.Duration

// MarshalText writes the Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("not a duration such as \"30s\" or \"1h\": %q", b)
	}
	*d = Duration(v)
	return nil
}
