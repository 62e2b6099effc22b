// Package cpupressure reads how long tasks on this machine have waited for
// a CPU (Linux's pressure stall information), so that a benchmark can say
// how contended the machine was while it measured: on a shared host a rate
// moves with other work, and this figure says how much there was.
package cpupressure

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// file is where Linux reports CPU pressure.
const file = "/proc/pressure/cpu"

// Mark is a reading of the machine's CPU pressure, taken when a
// measurement starts.
type Mark struct {
	stalled time.Duration
	ok      bool
}

// Read takes a reading: the time since boot during which at least one task
// on the machine was ready to run but waited for a CPU (the "some" line of
// /proc/pressure/cpu). A system that does not report it (not Linux, before
// 4.20, or pressure accounting off) gives a Mark whose Reported is false.
func Read() Mark {
	b, err := os.ReadFile(file)
	if err != nil {
		return Mark{}
	}
	s, ok := parse(string(b))
	return Mark{stalled: s, ok: ok}
}

// Reported reports whether the system gave the reading.
func (m Mark) Reported() bool { return m.ok }

// parse reads the total of the "some" line, in microseconds, from the
// content of a pressure file.
func parse(s string) (time.Duration, bool) {
	for line := range strings.Lines(s) {
		rest, ok := strings.CutPrefix(line, "some ")
		if !ok {
			continue
		}
		for field := range strings.FieldsSeq(rest) {
			if v, ok := strings.CutPrefix(field, "total="); ok {
				us, err := strconv.ParseInt(v, 10, 64)
				if err != nil || us < 0 {
					return 0, false
				}
				return time.Duration(us) * time.Microsecond, true
			}
		}
	}
	return 0, false
}

// Share is the part of elapsed, the wall time since m was read, during
// which some task waited for a CPU: 0 on a quiet machine, near 1 when
// something was always waiting. It is nil when either reading is missing.
func (m Mark) Share(elapsed time.Duration) *float64 {
	end := Read()
	if !m.ok || !end.ok || elapsed <= 0 {
		return nil
	}
	v := min(float64(end.stalled-m.stalled)/float64(elapsed), 1)
	return &v
}
