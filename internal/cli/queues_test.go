package cli

import (
	"encoding/json"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/kyuhq/kyu/server/api"
)

// TestQueues lists queues with their counts as a table and as JSON lines,
// and pauses and resumes one.
func TestQueues(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, url string) {
		enqueueID(t, url, "a", "--queue", "mail")
		enqueueID(t, url, "a", "--queue", "mail")
		enqueueID(t, url, "a", "--queue", "mail", "--delay", "1h")
		enqueueID(t, url, "b", "--queue", "reports")

		if out := mustKyu(t, url, "queues", "pause", "mail"); out != "queue mail paused\n" {
			t.Fatalf("queues pause = %q", out)
		}
		header, rows := tableRows(t, mustKyu(t, url, "queues"))
		want := []string{"QUEUE", "PAUSED", "SCHEDULED", "PENDING", "ACTIVE", "RETRY", "COMPLETED", "FAILED", "CANCELLED", "LATENCY"}
		if !slices.Equal(header, want) {
			t.Fatalf("header %q; want %q", header, want)
		}
		i := slices.IndexFunc(rows, func(r []string) bool { return r[0] == "mail" })
		if i < 0 || !slices.Equal(rows[i][:9], []string{"mail", "yes", "1", "2", "0", "0", "0", "0", "0"}) || rows[i][9] == "-" {
			t.Fatalf("rows %q; want mail paused with 1 scheduled, 2 pending and a latency", rows)
		}

		var q struct {
			api.Queue
			Latency string `json:"latency"`
		}
		var seen bool
		for line := range strings.Lines(mustKyu(t, url, "queues", "-o", "json")) {
			if err := json.Unmarshal([]byte(line), &q); err != nil {
				t.Fatal(err)
			}
			if q.Name == "reports" {
				seen = !q.Paused && q.Counts["pending"] == 1 && q.Latency != ""
			}
		}
		if !seen {
			t.Fatalf("queues -o json has no unpaused reports queue with 1 pending job")
		}

		var s struct {
			Name   string `json:"name"`
			Paused bool   `json:"paused"`
		}
		if err := json.Unmarshal([]byte(mustKyu(t, url, "queues", "resume", "mail", "-o", "json")), &s); err != nil || s.Name != "mail" || s.Paused {
			t.Fatalf("queues resume -o json = %+v, %v", s, err)
		}
		if _, _, err := kyuCmd(t, url, "", "queues", "pause", "bad name"); ExitCode(err) != ExitUsage {
			t.Fatalf("queues pause of a bad name = %v; want a usage error", err)
		}
	})
}

// TestQueuesPurgeRetry retries every failed job of a queue, then purges
// its pending ones.
func TestQueuesPurgeRetry(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, url string) {
		a := enqueueID(t, url, "fail", "--queue", "q")
		b := enqueueID(t, url, "fail", "--queue", "q")
		runWorker(t, url, workMux(), map[string]int{"q": 2}, a, b)

		if out := mustKyu(t, url, "queues", "retry", "q"); out != "retried 2 failed jobs of queue q\n" {
			t.Fatalf("queues retry = %q", out)
		}
		if _, _, err := kyuCmd(t, url, "", "queues", "purge", "q"); ExitCode(err) != ExitUsage {
			t.Fatalf("queues purge without --state = %v; want a usage error", err)
		}
		// stdin is no terminal here: no question is asked.
		var n api.Count
		if err := json.Unmarshal([]byte(mustKyu(t, url, "queues", "purge", "q", "--state", "pending", "-o", "json")), &n); err != nil || n.Count != 2 {
			t.Fatalf("queues purge -o json = %+v, %v; want count 2", n, err)
		}
		if out := mustKyu(t, url, "queues", "purge", "q", "--state", "pending", "--yes"); out != "deleted 0 pending jobs of queue q\n" {
			t.Fatalf("second purge = %q", out)
		}
	})
}

// TestConfirm reads yes and no answers.
func TestConfirm(t *testing.T) {
	t.Parallel()
	for answer, want := range map[string]bool{"y\n": true, "YES\n": true, "n\n": false, "\n": false, "": false} {
		var asked strings.Builder
		got, err := confirm(strings.NewReader(answer), &asked, "Delete?")
		if err != nil || got != want || asked.String() != "Delete? [y/N] " {
			t.Errorf("confirm(%q) = %v, %v (asked %q); want %v", answer, got, err, asked.String(), want)
		}
	}
}

// TestConfirmPurge checks that a purge asked on a terminal goes on only
// after yes.
func TestConfirmPurge(t *testing.T) {
	t.Parallel()
	var asked strings.Builder
	if err := confirmPurge(false, strings.NewReader(""), &asked, "Delete?"); err != nil || asked.Len() != 0 {
		t.Fatalf("confirmPurge without asking = %v (asked %q); want nil and no question", err, asked.String())
	}
	if err := confirmPurge(true, strings.NewReader("yes\n"), &asked, "Delete?"); err != nil || asked.String() != "Delete? [y/N] " {
		t.Fatalf("confirmPurge answered yes = %v (asked %q); want nil", err, asked.String())
	}
	if err := confirmPurge(true, strings.NewReader("no\n"), &asked, "Delete?"); err == nil || !strings.Contains(err.Error(), "nothing deleted") {
		t.Fatalf("confirmPurge answered no = %v; want an error saying nothing was deleted", err)
	}
}

// TestIsTerminal checks that neither a file, a null device nor a buffer
// is taken for a terminal.
func TestIsTerminal(t *testing.T) {
	t.Parallel()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	file, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for _, v := range []any{devNull, file, new(strings.Builder)} {
		if isTerminal(v) && runtime.GOOS == "linux" {
			t.Errorf("isTerminal(%T) = true", v)
		}
	}
}
