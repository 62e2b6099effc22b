package periodic

import "fmt"

// Options tunes a Scheduler. The zero value is ready to use.
type Options struct {
	// MaxPayload is passed on to Enqueue; 0 means backend.DefaultMaxPayload.
	MaxPayload int
}

func (o Options) validate() error {
	if o.MaxPayload < 0 {
		return fmt.Errorf("kyu: periodic options: MaxPayload %d is negative", o.MaxPayload)
	}
	return nil
}
