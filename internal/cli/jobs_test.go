package cli

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// enqueueID enqueues through the command line and returns the new id.
func enqueueID(t *testing.T, url string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(mustKyu(t, url, append([]string{"enqueue"}, args...)...))
}

// TestJobsList lists with filters, as a table and as JSON lines, and pages
// with --limit and --cursor.
func TestJobsList(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, url string) {
		a := enqueueID(t, url, "send", "{}", "--queue", "q1", "--title", "first one", "--tag", "vip")
		b := enqueueID(t, url, "send", "{}", "--queue", "q1", "--tag", "VIP")
		c := enqueueID(t, url, "build", "{}", "--queue", "q1", "--delay", "1h", "--tag", "x", "--tag", "vip")
		d := enqueueID(t, url, "send", "{}", "--queue", "q2", "--tag", "vip")

		header, rows := tableRows(t, mustKyu(t, url, "jobs", "list", "--queue", "q1"))
		if want := []string{"ID", "STATE", "QUEUE", "TYPE", "PRIO", "ATTEMPT", "RUN AT", "TITLE"}; !slices.Equal(header, want) {
			t.Fatalf("header %q; want %q", header, want)
		}
		if len(rows) != 3 || rows[0][0] != a || rows[1][0] != b || rows[2][0] != c ||
			rows[0][1] != "pending" || rows[0][2] != "q1" || rows[0][3] != "send" || rows[0][5] != "0/25" || rows[0][7] != "first one" {
			t.Fatalf("rows %q; want jobs %s %s %s of q1, oldest first", rows, a, b, c)
		}

		jobs := jsonLines[api.Job](t, mustKyu(t, url, "jobs", "list", "--queue", "q1", "--state", "scheduled", "-o", "json"))
		if len(jobs) != 1 || jobs[0].ID != c || jobs[0].State != "scheduled" || jobs[0].Type != "build" {
			t.Fatalf("--state scheduled -o json = %+v; want job %s", jobs, c)
		}
		jobs = jsonLines[api.Job](t, mustKyu(t, url, "jobs", "list", "--type", "send", "--order", "newest", "-o", "json"))
		if len(jobs) != 3 || jobs[2].ID != a {
			t.Fatalf("--type send --order newest = %d jobs; want 3, %s last", len(jobs), a)
		}

		jobs = jsonLines[api.Job](t, mustKyu(t, url, "jobs", "list", "--tag", "vip", "-o", "json"))
		if len(jobs) != 3 || jobs[0].ID != a || jobs[1].ID != c || jobs[2].ID != d {
			t.Fatalf("--tag vip = %+v; want jobs %s %s %s", jobs, a, c, d)
		}
		jobs = jsonLines[api.Job](t, mustKyu(t, url, "jobs", "list", "--tag", "vip", "--queue", "q1", "--state", "pending", "-o", "json"))
		if len(jobs) != 1 || jobs[0].ID != a {
			t.Fatalf("--tag vip --queue q1 --state pending = %+v; want job %s", jobs, a)
		}
		var usage *UsageError
		if _, _, err := kyuCmd(t, url, "", "jobs", "list", "--tag", strings.Repeat("t", backend.MaxTag+1)); !errors.As(err, &usage) {
			t.Fatalf("--tag of %d bytes: err %v; want a usage error", backend.MaxTag+1, err)
		}

		out, errOut, err := kyuCmd(t, url, "", "jobs", "list", "--queue", "q1", "--limit", "2", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		_, cursor, ok := strings.Cut(strings.TrimSpace(errOut), "--cursor ")
		if got := jsonLines[api.Job](t, out); len(got) != 2 || !ok {
			t.Fatalf("--limit 2 = %d jobs, stderr %q; want 2 and a cursor", len(got), errOut)
		}
		out, errOut, err = kyuCmd(t, url, "", "jobs", "list", "--queue", "q1", "--cursor", cursor, "-o", "json")
		if got := jsonLines[api.Job](t, out); err != nil || len(got) != 1 || got[0].ID != c || errOut != "" {
			t.Fatalf("--cursor = %+v, %q, %v; want job %s alone", got, errOut, err, c)
		}

		for _, args := range [][]string{{"--state", "sleeping"}, {"--order", "random"}, {"--limit", "-1"}, {"--cursor", "garbage"}} {
			_, _, err := kyuCmd(t, url, "", append([]string{"jobs", "list"}, args...)...)
			if ExitCode(err) != ExitUsage {
				t.Errorf("jobs list %q = %v; want a usage error", args, err)
			}
		}
	})
}

// TestJobsActions moves a job through run, cancel, retry and delete, and
// checks the exit code 3 for an unknown id.
func TestJobsActions(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, url string) {
		id := enqueueID(t, url, "later", "{}", "--delay", "1h")
		if out := mustKyu(t, url, "jobs", "run", id); out != id+" made pending: now pending\n" {
			t.Fatalf("jobs run = %q", out)
		}
		jobs := jsonLines[api.Job](t, mustKyu(t, url, "jobs", "cancel", id, "-o", "json"))
		if len(jobs) != 1 || jobs[0].State != "cancelled" || jobs[0].CancelReason != "requested" {
			t.Fatalf("jobs cancel -o json = %+v", jobs)
		}
		if out := mustKyu(t, url, "jobs", "retry", id); out != id+" retried: now pending\n" {
			t.Fatalf("jobs retry = %q", out)
		}
		// A pending job cannot be retried: exit 1, with the reason.
		_, errOut, err := kyuCmd(t, url, "", "jobs", "retry", id)
		if ExitCode(err) != ExitFailure || !strings.Contains(errOut, id) {
			t.Fatalf("retry of a pending job = %v, %q; want exit 1 and a reason", err, errOut)
		}
		other := enqueueID(t, url, "x")
		out, errOut, err := kyuCmd(t, url, "", "jobs", "delete", id, "nosuchjob", other)
		if ExitCode(err) != ExitNotFound || out != id+" deleted\n"+other+" deleted\n" || !strings.Contains(errOut, "nosuchjob") {
			t.Fatalf("delete with an unknown id = %q, %q, %v; want both deleted, the unknown one reported, exit 3", out, errOut, err)
		}
		for _, args := range [][]string{{"jobs", "get", id}, {"jobs", "cancel", id}, {"jobs", "wait", id}, {"jobs", "logs", id}} {
			_, _, err := kyuCmd(t, url, "", args...)
			if ExitCode(err) != ExitNotFound {
				t.Errorf("kyu %q of a deleted job = %v; want exit 3", args, err)
			}
		}
		out = mustKyu(t, url, "jobs", "delete", enqueueID(t, url, "y"), "-o", "json")
		if d := jsonLines[map[string]any](t, out); len(d) != 1 || d[0]["deleted"] != true {
			t.Fatalf("jobs delete -o json = %q", out)
		}
	})
}

// workMux handles "ok" jobs (two log lines, a progress and a result) and
// "fail" jobs (a permanent error).
func workMux() *kyu.Mux {
	mux := kyu.NewMux()
	mux.HandleFunc("ok", func(ctx context.Context, j *kyu.Job) error {
		_ = kyu.Log(ctx, "starting")
		_ = kyu.Progress(ctx, 50, "half way")
		_ = kyu.Log(ctx, "done")
		return j.SetResultJSON(map[string]int{"answer": 42})
	})
	mux.HandleFunc("fail", func(context.Context, *kyu.Job) error {
		return kyu.Permanent(errors.New("the printer is on fire"))
	})
	return mux
}

// TestJobsWaitGetLogs runs a job that logs and one that fails, then shows
// them with get, wait and logs.
func TestJobsWaitGetLogs(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, url string) {
		ok := enqueueID(t, url, "ok")
		bad := enqueueID(t, url, "fail")
		runWorker(t, url, workMux(), nil, ok, bad)

		var j api.Job
		if err := json.Unmarshal([]byte(mustKyu(t, url, "jobs", "wait", ok, "-o", "json")), &j); err != nil {
			t.Fatal(err)
		}
		if j.State != "completed" || compact(t, j.Result) != `{"answer":42}` || len(j.Logs) != 2 || j.Progress == nil || j.Progress.Percent != 50 {
			t.Fatalf("jobs wait -o json = %+v; want completed with result, logs and progress", j)
		}
		out := mustKyu(t, url, "jobs", "get", ok)
		for _, want := range []string{"completed", `{"answer":42}`, "50% half way", "Logs:", "starting", "done"} {
			if !strings.Contains(out, want) {
				t.Errorf("jobs get lacks %q:\n%s", want, out)
			}
		}

		out, _, err := kyuCmd(t, url, "", "jobs", "wait", bad)
		if ExitCode(err) != ExitFailure || !strings.Contains(out, "failed") || !strings.Contains(out, "Errors:") || !strings.Contains(out, "the printer is on fire") {
			t.Fatalf("jobs wait of a failed job = %v:\n%s\nwant exit 1 and its errors", err, out)
		}

		lines := strings.Split(strings.TrimSpace(mustKyu(t, url, "jobs", "logs", ok)), "\n")
		if len(lines) != 2 || !strings.HasSuffix(lines[0], "  starting") || !strings.HasSuffix(lines[1], "  done") {
			t.Fatalf("jobs logs = %q", lines)
		}
		logs := jsonLines[kyu.LogLine](t, mustKyu(t, url, "jobs", "logs", ok, "-o", "json"))
		if len(logs) != 2 || logs[1].Line != "done" || logs[1].At.IsZero() {
			t.Fatalf("jobs logs -o json = %+v", logs)
		}
		// --follow of a finished job prints its lines and ends by itself.
		if out := mustKyu(t, url, "jobs", "logs", ok, "--follow"); strings.Count(out, "\n") != 2 {
			t.Fatalf("jobs logs --follow of a finished job = %q", out)
		}
	})
}

// TestJobsLogsFollowCtrlC follows a job that is not finished: new lines
// appear as they are logged, and Ctrl-C ends the command with exit 0.
func TestJobsLogsFollowCtrlC(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, url string) {
		id := enqueueID(t, url, "slow")
		embedded := strings.HasPrefix(url, "pebble://")
		// The embedded store is the worker's while it runs: there the job
		// logs, then waits in retry for an hour, and the worker stops.
		mux := kyu.NewMux()
		more, finish := make(chan struct{}), make(chan struct{})
		defer close(finish) // lets the handler end, also when the test fails
		mux.HandleFunc("slow", func(ctx context.Context, _ *kyu.Job) error {
			_ = kyu.Log(ctx, "first line")
			if embedded {
				return kyu.RetryAfter(time.Hour, errors.New("later"))
			}
			select {
			case <-more:
			case <-finish:
				return nil
			}
			_ = kyu.Log(ctx, "second line")
			<-finish
			return nil
		})
		c, stop := startWorker(t, url, mux, nil)
		if embedded {
			eventually(t, "job in retry", func() bool {
				j, err := c.Get(t.Context(), id)
				return err == nil && j.State == backend.StateRetry
			})
			stop()
		}

		out, ctrlC, done := startKyu(t, url, "jobs", "logs", id, "--follow", "--interval", "20ms")
		out.waitFor(t, "first line")
		if !embedded {
			close(more)
			out.waitFor(t, "second line")
		}
		ctrlC()
		if err := ended(t, done); err != nil || ExitCode(err) != ExitOK {
			t.Fatalf("jobs logs --follow after Ctrl-C = %v; want exit 0", err)
		}
	})
}
