package periodic

import "time"

// Result tells what one Tick did.
type Result struct {
	// Ticks lists each tick the call handled, by schedule (in the order
	// given to New) and then by time.
	Ticks []TickResult
	// Skipped lists the ranges of ticks left out because they were past
	// their allowance by this call (see Tick).
	Skipped []Gap
}

// TickResult is the outcome for one tick.
type TickResult struct {
	// Schedule is the schedule's name.
	Schedule string
	// At is the tick.
	At time.Time
	// ID is the job's id: the new job's, or for a duplicate the id of the
	// job that holds the tick's key.
	ID string
	// Duplicate is true when the tick had been enqueued already (by another
	// process, or before a restart). It is a normal outcome.
	Duplicate bool
}

// Gap is a range of ticks of one schedule that a Tick skipped: those after
// After and before Before.
type Gap struct {
	// Schedule is the schedule's name.
	Schedule string
	// After is the previous Tick's time; Before is the oldest tick this
	// call enqueued.
	After, Before time.Time
}

// Enqueued counts the ticks the call wrote, duplicates left out.
func (r Result) Enqueued() int {
	n := 0
	for _, t := range r.Ticks {
		if !t.Duplicate {
			n++
		}
	}
	return n
}
