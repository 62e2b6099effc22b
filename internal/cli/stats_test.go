package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/kyuhq/kyu/server/api"
)

// TestStats shows the throughput after two jobs ran, as a table and as
// JSON.
func TestStats(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, url string) {
		ok, bad := enqueueID(t, url, "ok"), enqueueID(t, url, "fail")
		runWorker(t, url, workMux(), nil, ok, bad)

		var s api.Stats
		if err := json.Unmarshal([]byte(mustKyu(t, url, "stats", "--minutes", "5", "-o", "json")), &s); err != nil {
			t.Fatal(err)
		}
		if s.Processed != 2 || s.Failed != 1 || len(s.Minutes) != 5 || len(s.Queues) != 1 || s.Queues[0].Counts["completed"] != 1 {
			t.Fatalf("stats -o json = %+v; want 2 processed, 1 failed, 5 minutes, the default queue", s)
		}

		out := mustKyu(t, url, "stats", "--minutes", "3")
		blocks := strings.Split(out, "\n\n")
		if len(blocks) != 3 || !strings.Contains(blocks[0], "2 processed, 1 failed") {
			t.Fatalf("stats = %q; want a summary, minutes and queues", out)
		}
		header, rows := tableRows(t, blocks[1])
		if !slices.Equal(header, []string{"MINUTE", "PROCESSED", "FAILED"}) || len(rows) != 3 {
			t.Fatalf("minutes table %q %q", header, rows)
		}
		if header, _ := tableRows(t, blocks[2]); header[0] != "QUEUE" {
			t.Fatalf("queues table header %q", header)
		}
		if _, _, err := kyuCmd(t, url, "", "stats", "--minutes", "2000"); ExitCode(err) != ExitUsage {
			t.Fatalf("stats --minutes 2000 = %v; want a usage error", err)
		}
	})
}

// TestStatsWatchCtrlC watches the statistics and ends with Ctrl-C: exit 0,
// and each picture a JSON line.
func TestStatsWatchCtrlC(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, url string) {
		enqueueID(t, url, "a")
		out, ctrlC, done := startKyu(t, url, "stats", "--watch", "--interval", "20ms", "-o", "json")
		eventually(t, "two pictures", func() bool { return strings.Count(out.String(), "\n") >= 2 })
		ctrlC()
		if err := ended(t, done); err != nil || ExitCode(err) != ExitOK {
			t.Fatalf("stats --watch after Ctrl-C = %v; want exit 0", err)
		}
		for _, s := range jsonLines[api.Stats](t, out.String()) {
			if len(s.Queues) != 1 || s.Queues[0].Counts["pending"] != 1 {
				t.Fatalf("picture %+v; want the default queue with 1 pending job", s)
			}
		}

		out, ctrlC, done = startKyu(t, url, "stats", "--watch", "--interval", "20ms")
		eventually(t, "two pictures", func() bool { return strings.Count(out.String(), "kyu stats at") >= 2 })
		ctrlC()
		if err := ended(t, done); err != nil {
			t.Fatalf("stats --watch (table) after Ctrl-C = %v; want exit 0", err)
		}
		if strings.Contains(out.String(), clearScreen) {
			t.Fatal("stats --watch cleared a screen that is no terminal")
		}
	})
}
