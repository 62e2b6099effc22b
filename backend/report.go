package backend

import "time"

// Limits on what a handler reports.
const (
	// DefaultMaxLogLines is the number of log lines kept per job when
	// ReportParams.MaxLogLines is 0.
	DefaultMaxLogLines = 1000
	// LogLinesLimit is the most a caller may set ReportParams.MaxLogLines
	// to, so one job's log stays under LogLinesLimit*MaxLogLine bytes.
	LogLinesLimit = 10_000
	// MaxLogLine and MaxProgressMessage bound one line and one progress
	// message in bytes; longer ones are refused.
	MaxLogLine         = 8 << 10
	MaxProgressMessage = 1 << 10
)

// Progress is the latest progress a handler reported for a job.
type Progress struct {
	// Percent is in [0, 100].
	Percent float64   `json:"percent"`
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at"`
}

// LogLine is one line a handler logged for a job.
type LogLine struct {
	At   time.Time `json:"at"`
	Line string    `json:"line"`
}

// ReportItem reports for one job under its lease: a new Progress (At is
// set by the store to Now) and lines to append to its log.
type ReportItem struct {
	Lease    Lease
	Progress *Progress
	Logs     []string
}

// ReportParams reports for many jobs; each item stands alone.
//
// A job keeps at most MaxLogLines lines (DefaultMaxLogLines when 0): the
// first ones (the cap of each call applies to what the job holds then, so
// callers keep it constant). Lines past the cap are counted in Job.LogsDropped and not
// stored. Lines and progress persist across attempts.
type ReportParams struct {
	Items       []ReportItem
	MaxLogLines int
	Now         time.Time
}

// Check validates a report: Now, a Percent in [0, 100], and lines and
// messages within their bounds and ValidText.
func (p *ReportParams) Check() error {
	if err := CheckNow(p.Now); err != nil {
		return err
	}
	if p.MaxLogLines < 0 || p.MaxLogLines > LogLinesLimit {
		return invalid("max_log_lines", "%d is outside [0, %d]", p.MaxLogLines, LogLinesLimit)
	}
	for i, it := range p.Items {
		if pr := it.Progress; pr != nil {
			switch {
			case pr.Percent < 0 || pr.Percent > 100 || pr.Percent != pr.Percent:
				return &ValidationError{Index: i, Field: "progress", Reason: "percent must be within [0, 100]"}
			case len(pr.Message) > MaxProgressMessage:
				return &ValidationError{Index: i, Field: "progress", Reason: "message longer than 1 KiB"}
			case !ValidText(pr.Message):
				return &ValidationError{Index: i, Field: "progress", Reason: "message " + textReason}
			}
		}
		for _, l := range it.Logs {
			switch {
			case len(l) > MaxLogLine:
				return &ValidationError{Index: i, Field: "logs", Reason: "a line is longer than 8 KiB"}
			case !ValidText(l):
				return &ValidationError{Index: i, Field: "logs", Reason: "a line " + textReason}
			}
		}
	}
	return nil
}

// MaxLines is the effective cap on a job's log lines.
func (p *ReportParams) MaxLines() int {
	if p.MaxLogLines == 0 {
		return DefaultMaxLogLines
	}
	return p.MaxLogLines
}
