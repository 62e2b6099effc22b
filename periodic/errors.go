package periodic

import "fmt"

// SpecError reports a spec that does not parse.
type SpecError struct {
	// Spec is the text as given.
	Spec string
	// Reason says what is wrong with it.
	Reason string
	// Err is the parser's error behind Reason, if any.
	Err error
}

// Error names the spec and says what is wrong with it.
func (e *SpecError) Error() string {
	return fmt.Sprintf("kyu: periodic spec %q: %s", e.Spec, e.Reason)
}

// Unwrap returns the parser's error, if any.
func (e *SpecError) Unwrap() error { return e.Err }

// ScheduleError reports a schedule that New refuses.
type ScheduleError struct {
	// Index is the schedule's position in the slice given to New.
	Index int
	// Name is the schedule's name.
	Name string
	// Reason says what is wrong.
	Reason string
	// Err is the error behind Reason (a *SpecError or a
	// *backend.ValidationError), if any.
	Err error
}

// Error names the schedule and says what is wrong with it.
func (e *ScheduleError) Error() string {
	return fmt.Sprintf("kyu: periodic schedule %d (%q): %s", e.Index, e.Name, e.Reason)
}

// Unwrap returns the error behind Reason, if any.
func (e *ScheduleError) Unwrap() error { return e.Err }
