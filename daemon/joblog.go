package daemon

import (
	"fmt"
	"log/slog"
	"strings"
)

// JobLogOffName is the job log level that logs no per-job start and
// finish lines (see Config.JobLogOff).
const JobLogOffName = "off"

// ParseJobLogLevel reads the level of the per-job start and finish lines:
// "debug", "info", "warn" or "error" (as slog.Level's text, so "info+2"
// too), or "off", which reports off true.
func ParseJobLogLevel(s string) (level slog.Level, off bool, err error) {
	if strings.EqualFold(strings.TrimSpace(s), JobLogOffName) {
		return 0, true, nil
	}
	if err := level.UnmarshalText([]byte(strings.TrimSpace(s))); err != nil {
		return 0, false, fmt.Errorf("%q: want debug, info, warn, error or off", s)
	}
	return level, false, nil
}

// FormatJobLogLevel is the name ParseJobLogLevel reads back as level and
// off: "off", or the level in lower case.
func FormatJobLogLevel(level slog.Level, off bool) string {
	if off {
		return JobLogOffName
	}
	return strings.ToLower(level.String())
}
