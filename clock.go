package kyu

import "time"

// Clock tells the time. Client and Worker take every time they give the
// store from it, and so does a server (server.Config.Clock), so tests
// can drive time. Nil means the system clock.
type Clock interface {
	Now() time.Time
}

// systemClock is the default Clock.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
