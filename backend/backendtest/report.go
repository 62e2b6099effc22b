package backendtest

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// report records one item at f.now with the cap maxLines and returns the
// item's error.
func (f *fixture) report(item backend.ReportItem, maxLines int) error {
	f.t.Helper()
	res, err := f.b.Report(f.ctx, backend.ReportParams{Items: []backend.ReportItem{item}, MaxLogLines: maxLines, Now: f.now})
	return f.only("Report", res, err)
}

// logLines returns the lines of a job's log, for comparison.
func logLines(j *backend.Job) []string {
	var out []string
	for _, l := range j.Logs {
		out = append(out, l.Line)
	}
	return out
}

// wantLogs checks a job's log lines and LogsDropped.
func (f *fixture) wantLogs(id string, lines []string, dropped int) *backend.Job {
	f.t.Helper()
	j := f.get(id)
	if got := logLines(j); strings.Join(got, "\n") != strings.Join(lines, "\n") || len(got) != len(lines) {
		f.t.Fatalf("job %s logs %q; want %q", id, got, lines)
	}
	if j.LogsDropped != dropped {
		f.t.Fatalf("job %s LogsDropped = %d; want %d", id, j.LogsDropped, dropped)
	}
	return j
}

func testReport(t *testing.T, factory Factory) {
	t.Run("Progress", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		if got := f.get(j.ID); got.Progress != nil {
			t.Fatalf("a job nobody reported on has Progress %+v; want nil", got.Progress)
		}
		f.advance(time.Second)
		f.mustOK("Report", f.report(backend.ReportItem{Lease: lease(j), Progress: &backend.Progress{Percent: 10, Message: "started", At: t0.Add(-time.Hour)}}, 0))
		got := f.get(j.ID)
		if got.Progress == nil || got.Progress.Percent != 10 || got.Progress.Message != "started" {
			t.Fatalf("Progress = %+v; want 10%% \"started\"", got.Progress)
		}
		f.wantTime("Progress.At (set by the store)", got.Progress.At, f.now)

		f.advance(time.Second)
		f.mustOK("Report", f.report(backend.ReportItem{Lease: lease(j), Progress: &backend.Progress{Percent: 55.5}}, 0))
		got = f.get(j.ID)
		if got.Progress == nil || got.Progress.Percent != 55.5 || got.Progress.Message != "" {
			t.Fatalf("Progress after a second report = %+v; want 55.5%% with no message (replaced, not merged)", got.Progress)
		}
		f.wantTime("Progress.At of the second report", got.Progress.At, f.now)
		at := f.now

		f.advance(time.Second)
		f.mustOK("Report of lines only", f.report(backend.ReportItem{Lease: lease(j), Logs: []string{"line"}}, 0))
		got = f.get(j.ID)
		if got.Progress == nil || got.Progress.Percent != 55.5 {
			t.Fatalf("Progress after a report without one = %+v; want the previous one kept", got.Progress)
		}
		f.wantTime("Progress.At after a report without progress", got.Progress.At, at)
	})

	t.Run("Logs", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		first := f.advance(time.Second)
		f.mustOK("Report", f.report(backend.ReportItem{Lease: lease(j), Logs: []string{"one", "two"}}, 0))
		second := f.advance(time.Second)
		f.mustOK("Report", f.report(backend.ReportItem{Lease: lease(j), Logs: []string{"three", "ünïcödé ✓", ""}}, 0))
		got := f.wantLogs(j.ID, []string{"one", "two", "three", "ünïcödé ✓", ""}, 0)
		for i, want := range []time.Time{first, first, second, second, second} {
			f.wantTime(fmt.Sprintf("Logs[%d].At", i), got.Logs[i].At, want)
		}
		if got.Progress != nil {
			t.Fatalf("a report of lines only set Progress %+v", got.Progress)
		}
	})

	t.Run("Cap", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		f.mustOK("Report", f.report(backend.ReportItem{Lease: lease(j), Logs: []string{"a", "b"}}, 3))
		f.mustOK("Report", f.report(backend.ReportItem{Lease: lease(j), Logs: []string{"c", "d", "e"}}, 3))
		f.wantLogs(j.ID, []string{"a", "b", "c"}, 2)
		f.mustOK("Report", f.report(backend.ReportItem{Lease: lease(j), Logs: []string{"f"}}, 3))
		f.wantLogs(j.ID, []string{"a", "b", "c"}, 3)
	})

	t.Run("DefaultCap", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		var want []string
		for i := range backend.DefaultMaxLogLines + 5 {
			want = append(want, fmt.Sprintf("line %d", i))
		}
		for i := 0; i < len(want); i += 250 {
			f.mustOK("Report", f.report(backend.ReportItem{Lease: lease(j), Logs: want[i:min(i+250, len(want))]}, 0))
		}
		f.wantLogs(j.ID, want[:backend.DefaultMaxLogLines], 5)
	})

	t.Run("Lease", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueOne(backend.NewJob{Retention: backend.RetainForever})
		j := f.claimOne()
		f.mustOK("Report", f.report(backend.ReportItem{Lease: lease(j), Logs: []string{"kept"}}, 0))
		item := func(l backend.Lease) backend.ReportItem {
			return backend.ReportItem{Lease: l, Progress: &backend.Progress{Percent: 99}, Logs: []string{"stale"}}
		}
		before := f.get(j.ID)
		stale := lease(j)
		stale.Token++
		f.mustErr("Report with a wrong token", f.report(item(stale), 0), backend.ErrLeaseLost, "the token is not the job's")
		f.unchanged(before, "a Report with a wrong token changes nothing")
		f.mustErr("Report of an unknown id", f.report(item(backend.Lease{JobID: f.unknownID(), Token: 1}), 0), backend.ErrNotFound, "no job has this id")

		f.now = j.LeaseExpiresAt
		f.mustErr("Report at LeaseExpiresAt", f.report(item(lease(j)), 0), backend.ErrLeaseLost, "the lease is dead from its expiry on")
		f.unchanged(before, "a Report on a dead lease changes nothing")

		f.now = j.LeaseExpiresAt.Add(-time.Millisecond)
		f.mustOK("Complete", f.complete(lease(j), nil))
		before = f.get(j.ID)
		f.mustErr("Report after Complete", f.report(item(lease(j)), 0), backend.ErrLeaseLost, "the job is completed")
		f.unchanged(before, "a Report on a completed job changes nothing")
		f.wantLogs(j.ID, []string{"kept"}, 0)
	})

	t.Run("ItemsStandAlone", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueN(2)
		jobs := f.claim(2)
		if len(jobs) != 2 {
			t.Fatalf("Claim(max 2) returned %d jobs", len(jobs))
		}
		stale := lease(jobs[0])
		stale.Token++
		res, err := f.b.Report(f.ctx, backend.ReportParams{Now: f.now, Items: []backend.ReportItem{
			{Lease: stale, Logs: []string{"x"}}, {Lease: lease(jobs[1]), Logs: []string{"y"}},
		}})
		if err != nil || len(res.Errors) != 2 || !errors.Is(res.Errors[0], backend.ErrLeaseLost) || res.Errors[1] != nil {
			t.Fatalf("Report of [stale, live] = %v, %v; want [ErrLeaseLost, nil]", res.Errors, err)
		}
		f.wantLogs(jobs[0].ID, nil, 0)
		f.wantLogs(jobs[1].ID, []string{"y"}, 0)
	})

	t.Run("SurvivesRetries", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{Retention: backend.RetainForever})
		j := f.claimOne()
		f.mustOK("Report", f.report(backend.ReportItem{Lease: lease(j), Progress: &backend.Progress{Percent: 30}, Logs: []string{"attempt 1"}}, 0))
		f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "again", RetryAt: f.now}))
		got := f.wantLogs(id, []string{"attempt 1"}, 0)
		if got.Progress == nil || got.Progress.Percent != 30 {
			t.Fatalf("Progress after a failed attempt = %+v; want 30%% kept", got.Progress)
		}
		j = f.claimID(id, "the retried job")
		f.mustOK("Release", f.release(lease(j)))
		j = f.claimID(id, "the released job")
		f.mustOK("Report", f.report(backend.ReportItem{Lease: lease(j), Logs: []string{"attempt 2"}}, 0))
		f.mustOK("Complete", f.complete(lease(j), nil))
		got = f.wantLogs(id, []string{"attempt 1", "attempt 2"}, 0)
		if got.Progress == nil || got.Progress.Percent != 30 {
			t.Fatalf("Progress of the completed job = %+v; want 30%% kept for the job's life", got.Progress)
		}
	})

	t.Run("Checks", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		f.mustOK("Report of the longest line and message", f.report(backend.ReportItem{Lease: lease(j),
			Progress: &backend.Progress{Percent: 100, Message: strings.Repeat("m", backend.MaxProgressMessage)},
			Logs:     []string{strings.Repeat("l", backend.MaxLogLine)}}, 0))
		before := f.get(j.ID)
		good := backend.ReportItem{Lease: lease(j), Progress: &backend.Progress{Percent: 1}, Logs: []string{"good"}}
		for _, c := range []struct {
			name  string
			field string
			item  backend.ReportItem
		}{
			{"PercentBelow", "progress", backend.ReportItem{Lease: lease(j), Progress: &backend.Progress{Percent: -0.5}}},
			{"PercentAbove", "progress", backend.ReportItem{Lease: lease(j), Progress: &backend.Progress{Percent: 100.5}}},
			{"PercentNaN", "progress", backend.ReportItem{Lease: lease(j), Progress: &backend.Progress{Percent: math.NaN()}}},
			{"LongMessage", "progress", backend.ReportItem{Lease: lease(j), Progress: &backend.Progress{Percent: 1, Message: strings.Repeat("m", backend.MaxProgressMessage+1)}}},
			{"MessageUTF8", "progress", backend.ReportItem{Lease: lease(j), Progress: &backend.Progress{Percent: 1, Message: "bad \xff"}}},
			{"LongLine", "logs", backend.ReportItem{Lease: lease(j), Logs: []string{"ok", strings.Repeat("l", backend.MaxLogLine+1)}}},
			{"LineUTF8", "logs", backend.ReportItem{Lease: lease(j), Logs: []string{"ok", "bad \xc3\x28"}}},
			{"LineNUL", "logs", backend.ReportItem{Lease: lease(j), Logs: []string{"ok", "nul \x00 inside"}}},
			{"MessageNUL", "progress", backend.ReportItem{Lease: lease(j), Progress: &backend.Progress{Percent: 1, Message: "\x00"}}},
		} {
			// The bad item follows a good one; neither may be written.
			_, err := f.b.Report(f.ctx, backend.ReportParams{Items: []backend.ReportItem{good, c.item}, Now: f.now})
			wantInvalid(t, err, 1, c.field)
			f.unchanged(before, c.name+" was refused")
		}
		_, err := f.b.Report(f.ctx, backend.ReportParams{Items: []backend.ReportItem{good}, MaxLogLines: -1, Now: f.now})
		wantInvalid(t, err, -1, "max_log_lines")
		_, err = f.b.Report(f.ctx, backend.ReportParams{Items: []backend.ReportItem{good}, MaxLogLines: backend.LogLinesLimit + 1, Now: f.now})
		wantInvalid(t, err, -1, "max_log_lines")
		_, err = f.b.Report(f.ctx, backend.ReportParams{Items: []backend.ReportItem{good}})
		wantInvalid(t, err, -1, "now")
		f.unchanged(before, "refused reports change nothing")
	})
}
