package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

// TestWorkers lists a running worker through a server, and none on an
// embedded store whose worker stopped.
func TestWorkers(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, url string) {
		mux := kyu.NewMux()
		mux.HandleFunc("x", func(context.Context, *kyu.Job) error { return nil })
		c, stop := startWorker(t, url, mux, map[string]int{"mail": 3})
		var id string
		eventually(t, "worker registered", func() bool {
			ws, err := c.Workers(t.Context())
			if err == nil && len(ws) == 1 {
				id = ws[0].ID
			}
			return id != ""
		})
		if strings.HasPrefix(url, "pebble://") {
			// The store is the worker's while it runs.
			stop()
			header, rows := tableRows(t, mustKyu(t, url, "workers"))
			if header[0] != "ID" || len(rows) != 0 {
				t.Fatalf("workers after the worker stopped: %q %q", header, rows)
			}
			return
		}
		header, rows := tableRows(t, mustKyu(t, url, "workers"))
		want := []string{"ID", "STATE", "HOST", "PID", "QUEUES", "CONCURRENCY", "RUNNING", "PROCESSED", "FAILED", "STARTED", "LAST SEEN"}
		if strings.Join(header, "|") != strings.Join(want, "|") {
			t.Fatalf("header %q; want %q", header, want)
		}
		if len(rows) != 1 || rows[0][0] != id || rows[0][1] != "running" || rows[0][4] != "mail" || rows[0][5] != "3" {
			t.Fatalf("rows %q; want worker %s, running, on mail with 3", rows, id)
		}
		ws := jsonLines[backend.WorkerInfo](t, mustKyu(t, url, "workers", "-o", "json"))
		if len(ws) != 1 || ws[0].ID != id || ws[0].Dead || ws[0].Concurrency != 3 {
			t.Fatalf("workers -o json = %+v", ws)
		}

		// The commands land on the entry; the worker takes them up at its
		// next refresh (10s away: not waited for here).
		if out := mustKyu(t, url, "workers", "quiet", id); !strings.Contains(out, "quiet sent") {
			t.Fatalf("workers quiet: %q", out)
		}
		ws = jsonLines[backend.WorkerInfo](t, mustKyu(t, url, "workers", "-o", "json"))
		if len(ws) != 1 || ws[0].Command != backend.CommandQuiet {
			t.Fatalf("after workers quiet, workers -o json = %+v; want command quiet", ws)
		}
		if _, rows := tableRows(t, mustKyu(t, url, "workers")); rows[0][1] != "running (quiet sent)" {
			t.Fatalf("STATE after workers quiet = %q; want running (quiet sent)", rows[0][1])
		}
		var stopped backend.WorkerInfo
		if err := json.Unmarshal([]byte(mustKyu(t, url, "workers", "stop", id, "-o", "json")), &stopped); err != nil || stopped.Command != backend.CommandStop {
			t.Fatalf("workers stop -o json = %+v, %v; want command stop", stopped, err)
		}
		if _, _, err := kyuCmd(t, url, "", "workers", "stop", "no-such-worker"); err == nil {
			t.Fatalf("workers stop of an unknown id succeeded")
		}
	})
}
