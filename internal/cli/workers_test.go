package cli

import (
	"context"
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
		if len(rows) != 1 || rows[0][0] != id || rows[0][1] != "live" || rows[0][4] != "mail" || rows[0][5] != "3" {
			t.Fatalf("rows %q; want worker %s, live, on mail with 3", rows, id)
		}
		ws := jsonLines[backend.WorkerInfo](t, mustKyu(t, url, "workers", "-o", "json"))
		if len(ws) != 1 || ws[0].ID != id || ws[0].Dead || ws[0].Concurrency != 3 {
			t.Fatalf("workers -o json = %+v", ws)
		}
	})
}
