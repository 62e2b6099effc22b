package pebble

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kyuhq/kyu/backend"
)

// These tests cover what the conformance suite cannot see: that the
// lifecycle state survives a restart (queue settings, counts, logs,
// counters, the registry), and how the store keeps it.

// reopen closes s and opens its directory again.
func reopen(t *testing.T, s *Store, dir string) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return openStore(t, dir, Options{})
}

// signalled waits, up to a deadline, for a signal on c.
func signalled(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("no signal for %s", what)
	}
}

func mustOK(t *testing.T, what string, res backend.BatchResult, err error) {
	t.Helper()
	if err != nil || len(res.Errors) == 0 {
		t.Fatalf("%s = %+v, %v", what, res, err)
	}
	for i, e := range res.Errors {
		if e != nil {
			t.Fatalf("%s: item %d: %v", what, i, e)
		}
	}
}

func TestCancelActiveEndsCancelledWhateverTheOutcome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, t.TempDir(), Options{})
	outcomes := map[string]func(j *backend.Job) (backend.BatchResult, error){
		"complete": func(j *backend.Job) (backend.BatchResult, error) {
			return s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: leaseOf(j), Result: []byte("r")}}, Now: t0})
		},
		"fail": func(j *backend.Job) (backend.BatchResult, error) {
			return s.Fail(ctx, backend.FailParams{Items: []backend.FailItem{{Lease: leaseOf(j), Message: "boom", RetryAt: t0.Add(time.Hour)}}, Now: t0})
		},
		"release": func(j *backend.Job) (backend.BatchResult, error) {
			return s.Release(ctx, backend.ReleaseParams{Leases: []backend.Lease{leaseOf(j)}, Now: t0})
		},
	}
	for name, end := range outcomes {
		q := "c-" + name
		id := enqueue(t, s, t0, backend.NewJob{Queue: q, Retention: backend.RetainForever})[0].ID
		j := claim(t, s, t0, 1, q)[0]
		c, err := s.Cancel(ctx, backend.CancelParams{ID: id, Now: t0})
		if err != nil || c.State != backend.StateActive || !c.CancelRequested {
			t.Fatalf("%s: Cancel of an active job = %+v, %v; want active with CancelRequested", name, c, err)
		}
		hb, err := s.Heartbeat(ctx, backend.HeartbeatParams{Leases: []backend.Lease{leaseOf(j)}, Extend: time.Minute, Now: t0})
		if err != nil || hb.Leases[0].Lost || !hb.Leases[0].CancelRequested {
			t.Fatalf("%s: Heartbeat = %+v, %v; want live with CancelRequested", name, hb, err)
		}
		res, err := end(j)
		mustOK(t, name, res, err)
		got := get(t, s, id)
		if got.State != backend.StateCancelled || got.CancelReason != backend.CancelReasonRequested || !got.CancelRequested || !got.ExpiresAt.IsZero() {
			t.Fatalf("%s after a cancel request: %s reason %q requested %v expires %s; want cancelled, requested (still marked), kept forever",
				name, got.State, got.CancelReason, got.CancelRequested, got.ExpiresAt)
		}
		if name == "complete" && string(got.Result) != "r" {
			t.Fatalf("complete after a cancel request dropped the result: %q", got.Result)
		}
		if _, err := s.Cancel(ctx, backend.CancelParams{ID: id, Now: t0}); !errors.Is(err, backend.ErrWrongState) {
			t.Fatalf("%s: Cancel of a cancelled job = %v; want ErrWrongState", name, err)
		}
	}

	// Lease expiry of a job whose cancel was requested.
	id := enqueue(t, s, t0, backend.NewJob{Queue: "c-lease", Retention: backend.RetainForever})[0].ID
	claim(t, s, t0, 1, "c-lease")
	if _, err := s.Cancel(ctx, backend.CancelParams{ID: id, Now: t0}); err != nil {
		t.Fatal(err)
	}
	m, err := s.RecoverLeases(ctx, backend.MaintenanceParams{Now: t0.Add(time.Minute)})
	if err != nil || m.Moved != 1 || m.Failed != 0 {
		t.Fatalf("RecoverLeases = %+v, %v; want one moved, none failed", m, err)
	}
	if j := get(t, s, id); j.State != backend.StateCancelled || j.Errors[len(j.Errors)-1].Kind != backend.AttemptLeaseExpired {
		t.Fatalf("recovered job with a cancel request: %s %+v", j.State, j.Errors)
	}

	// The handler's own cancel.
	id = enqueue(t, s, t0, backend.NewJob{Queue: "c-handler", Retention: backend.RetainForever})[0].ID
	j := claim(t, s, t0, 1, "c-handler")[0]
	res, err := s.Fail(ctx, backend.FailParams{Items: []backend.FailItem{{Lease: leaseOf(j), Message: "stop", Final: true, Cancel: true}}, Now: t0})
	mustOK(t, "Fail with Cancel", res, err)
	if j := get(t, s, id); j.State != backend.StateCancelled || j.CancelReason != backend.CancelReasonHandler || j.Errors[0].Kind != backend.AttemptCancelled {
		t.Fatalf("handler cancel: %s reason %q errors %+v", j.State, j.CancelReason, j.Errors)
	}
}

func TestQueueSettingsAndCountsSurviveRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	paused := true
	keep := backend.QueueRetention{Completed: backend.RetainFor(time.Hour), Failed: backend.RetainNone}
	if _, err := s.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: "p", Paused: &paused, Retention: &keep, Now: t0}); err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, t0, backend.NewJob{Queue: "p"}, backend.NewJob{Queue: "p"}, backend.NewJob{Queue: "p", RunAt: t0.Add(time.Hour)})
	if got := claim(t, s, t0, 10, "p"); len(got) != 0 {
		t.Fatalf("claimed %d jobs from a paused queue", len(got))
	}

	s = reopen(t, s, dir)
	if got := claim(t, s, t0, 10, "p"); len(got) != 0 {
		t.Fatalf("after a restart, claimed %d jobs from a paused queue", len(got))
	}
	sub, err := s.Subscribe(ctx, backend.SubscribeParams{Queues: []string{"p"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	resume := false
	st, err := s.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: "p", Paused: &resume, Now: t0})
	if err != nil || st.Paused || st.Retention != keep {
		t.Fatalf("UpdateQueue(resume) = %+v, %v; want running with the retention kept", st, err)
	}
	signalled(t, sub.C, "resuming a queue with pending jobs")
	got := claim(t, s, t0, 10, "p")
	if len(got) != 2 {
		t.Fatalf("claimed %d jobs after resuming; want 2", len(got))
	}
	// The queue's override decides ExpiresAt (completed: an hour) and
	// deletion at once (failed: none).
	res0, err0 := s.completeOne(ctx, got[0])
	mustOK(t, "Complete", res0, err0)
	res, err := s.Fail(ctx, backend.FailParams{Items: []backend.FailItem{{Lease: leaseOf(got[1]), Final: true}}, Now: t0})
	mustOK(t, "Fail", res, err)
	if j := get(t, s, got[0].ID); !j.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("completed job expires at %s; want the queue's hour, %s", j.ExpiresAt, t0.Add(time.Hour))
	}
	if _, err := s.Get(ctx, backend.GetParams{ID: got[1].ID}); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("failed job under the queue's keep-none override: Get = %v; want ErrNotFound", err)
	}

	want := backend.NewCounts()
	want[backend.StateScheduled], want[backend.StateCompleted] = 1, 1
	for round := range 2 {
		stats, err := s.Stats(ctx, backend.StatsParams{Now: t0, Minutes: 2})
		if err != nil {
			t.Fatal(err)
		}
		q := findQueue(t, stats, "p")
		if fmt.Sprint(q.Counts) != fmt.Sprint(want) || q.Settings.Retention != keep {
			t.Fatalf("round %d: counts %v settings %+v; want %v with the retention kept", round, q.Counts, q.Settings, want)
		}
		last := stats.Minutes[len(stats.Minutes)-1]
		if stats.Processed != 2 || stats.Failed != 1 || last.Processed != 2 || last.Failed != 1 || !last.Minute.Equal(t0) {
			t.Fatalf("round %d: counters %d/%d, last minute %+v; want 2 processed, 1 failed at %s", round, stats.Processed, stats.Failed, last, t0)
		}
		if want := (backend.AttemptCount{Processed: 2, Failed: 1}); q.LastFiveMinutes != want || q.LastHour != want {
			t.Fatalf("round %d: queue p counts %+v, %+v; want %+v in both windows", round, q.LastFiveMinutes, q.LastHour, want)
		}
		s = reopen(t, s, dir)
	}

	// ApplyRetention drops minutes older than StatsHistory, never the
	// totals.
	later := t0.Add(backend.StatsHistory)
	if _, err := s.ApplyRetention(ctx, backend.MaintenanceParams{Now: later}); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, dir)
	if len(s.counters.minutes) != 0 || len(s.counters.queues) != 0 {
		t.Fatalf("%d minutes, %d queue minutes kept past StatsHistory", len(s.counters.minutes), len(s.counters.queues))
	}
	stats, err := s.Stats(ctx, backend.StatsParams{Now: later, Minutes: 1440})
	if err != nil || stats.Processed != 2 || stats.Minutes[0].Processed != 0 || len(stats.Minutes) != 1440 {
		t.Fatalf("Stats after dropping minutes = %d processed, %d minutes, %v; want totals kept", stats.Processed, len(stats.Minutes), err)
	}
}

func (s *Store) completeOne(ctx context.Context, j *backend.Job) (backend.BatchResult, error) {
	return s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: leaseOf(j)}}, Now: t0})
}

func findQueue(t *testing.T, st backend.Stats, name string) backend.QueueInfo {
	t.Helper()
	for _, q := range st.Queues {
		if q.Name == name {
			return q
		}
	}
	t.Fatalf("queue %s not in stats", name)
	return backend.QueueInfo{}
}

func TestReportLogsLiveUnderTheirOwnKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	id := enqueue(t, s, t0, backend.NewJob{Payload: []byte("p"), Retention: backend.RetainForever})[0].ID
	j := claim(t, s, t0, 1)[0]
	report := func(now time.Time, lines ...string) {
		t.Helper()
		res, err := s.Report(ctx, backend.ReportParams{
			Items:       []backend.ReportItem{{Lease: leaseOf(j), Progress: &backend.Progress{Percent: 50, Message: "half"}, Logs: lines}},
			MaxLogLines: 3, Now: now,
		})
		mustOK(t, "Report", res, err)
	}
	report(t0, "a", "b")
	report(t0.Add(time.Second), "c", "d", "e")
	res0, err0 := s.completeOne(ctx, j)
	mustOK(t, "Complete", res0, err0)
	for round := range 2 {
		g := get(t, s, id)
		if len(g.Logs) != 3 || g.Logs[2].Line != "c" || !g.Logs[2].At.Equal(t0.Add(time.Second)) || g.LogsDropped != 2 ||
			g.Progress == nil || g.Progress.Message != "half" || !g.Progress.At.Equal(t0.Add(time.Second)) || string(g.Payload) != "p" {
			t.Fatalf("round %d: logs %+v dropped %d progress %+v payload %q", round, g.Logs, g.LogsDropped, g.Progress, g.Payload)
		}
		// The record itself holds no line.
		v, closer, err := s.db.Get(jobKey(mustParse(t, id)))
		if err != nil {
			t.Fatal(err)
		}
		if len(v) > 200 {
			t.Fatalf("record of %d bytes; the lines should live under their own keys", len(v))
		}
		_ = closer.Close()
		s = reopen(t, s, dir)
	}
	list, err := s.List(ctx, backend.ListParams{})
	if err != nil || len(list.Jobs) != 1 || list.Jobs[0].Logs != nil || list.Jobs[0].Payload != nil {
		t.Fatalf("List = %+v, %v; want the job without payload or logs", list, err)
	}
	// A job with more lines than are deleted one at a time.
	chatty := enqueue(t, s, t0, backend.NewJob{Retention: backend.RetainForever})[0].ID
	cj := claim(t, s, t0, 1)[0]
	lines := make([]string, 100)
	for i := range lines {
		lines[i] = fmt.Sprint("line ", i)
	}
	res, err := s.Report(ctx, backend.ReportParams{Items: []backend.ReportItem{{Lease: leaseOf(cj), Logs: lines}}, Now: t0})
	mustOK(t, "Report of 100 lines", res, err)
	if g := get(t, s, chatty); len(g.Logs) != 100 || g.Logs[99].Line != "line 99" || g.LogsDropped != 0 {
		t.Fatalf("chatty job: %d lines, last %+v, dropped %d", len(g.Logs), g.Logs[len(g.Logs)-1], g.LogsDropped)
	}
	res, err = s.Fail(ctx, backend.FailParams{Items: []backend.FailItem{{Lease: leaseOf(cj), Final: true}}, Now: t0})
	mustOK(t, "Fail", res, err)
	for _, id := range []string{id, chatty} {
		if err := s.Delete(ctx, backend.DeleteParams{ID: id, Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	if n := countKeys(t, s, prefixLog); n != 0 {
		t.Fatalf("%d log keys left after deleting the jobs", n)
	}
}

func mustParse(t *testing.T, text string) jobID {
	t.Helper()
	id, ok := parseID(text)
	if !ok {
		t.Fatalf("bad id %q", text)
	}
	return id
}

func countKeys(t *testing.T, s *Store, prefix byte) int {
	t.Helper()
	it, err := s.db.NewIter(&cpebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n
}

func TestWorkersSurviveRestartAndExpire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	for _, id := range []string{"w2", "w1"} {
		_, err := s.RegisterWorker(ctx, backend.RegisterWorkerParams{
			Worker:    backend.WorkerInfo{ID: id, Host: "h", PID: 7, Queues: []string{"q"}, Running: []string{"x"}, Processed: 3},
			DeadAfter: time.Minute, ExpireAfter: time.Hour, Now: t0,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	s = reopen(t, s, dir)
	ws, err := s.Workers(ctx, backend.WorkersParams{Now: t0.Add(time.Minute)})
	if err != nil || len(ws) != 2 || ws[0].ID != "w1" || !ws[0].Dead || ws[0].Processed != 3 || ws[0].Running[0] != "x" || !ws[0].ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("Workers after a restart = %+v, %v; want w1, w2, dead, as registered", ws, err)
	}
	if err := s.DeregisterWorker(ctx, backend.DeregisterWorkerParams{ID: "w2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyRetention(ctx, backend.MaintenanceParams{Now: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, s, prefixWorker); n != 0 {
		t.Fatalf("%d worker keys left after deregistration and expiry", n)
	}
	s = reopen(t, s, dir)
	if ws, err := s.Workers(ctx, backend.WorkersParams{Now: t0}); err != nil || len(ws) != 0 {
		t.Fatalf("Workers after expiry = %+v, %v; want none", ws, err)
	}
}

// TestFormat1StoreIsUpgraded writes a store as format 1 code did (marker
// and a version 1 record) and checks that it opens, keeps the job with its
// old retention, counts it, and is marked format 2.
func TestFormat1StoreIsUpgraded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	id := enqueue(t, s, t0, backend.NewJob{Queue: "old"})[0].ID
	res0, err0 := s.completeOne(ctx, claim(t, s, t0, 1, "old")[0])
	mustOK(t, "Complete", res0, err0)
	j := get(t, s, id)
	j.ExpiresAt = time.Time{}
	if err := s.db.Set(jobKey(mustParse(t, id)), encodeJobV1(j, side{}), cpebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := writeMarkerVersion(dir, 1); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, Options{})
	if v, err := readMarker(vfsDefault(), dir); err != nil || v != formatVersion {
		t.Fatalf("marker after opening a format 1 store = %d, %v; want %d", v, err, formatVersion)
	}
	if g := get(t, s, id); !g.ExpiresAt.Equal(t0.Add(backend.DefaultRetentionCompleted)) {
		t.Fatalf("version 1 record: ExpiresAt %s; want FinishedAt + the default, %s", g.ExpiresAt, t0.Add(backend.DefaultRetentionCompleted))
	}
	st, err := s.Stats(ctx, backend.StatsParams{Now: t0})
	if err != nil || findQueue(t, st, "old").Counts[backend.StateCompleted] != 1 {
		t.Fatalf("Stats of a format 1 store = %+v, %v", st, err)
	}
	m, err := s.ApplyRetention(ctx, backend.MaintenanceParams{Now: t0.Add(backend.DefaultRetentionCompleted)})
	if err != nil || m.Moved != 1 {
		t.Fatalf("ApplyRetention of the old record = %+v, %v; want it deleted", m, err)
	}
}

// writeMarkerVersion overwrites a store's marker with the given format.
func writeMarkerVersion(dir string, v int) error {
	return os.WriteFile(filepath.Join(dir, markerFile), fmt.Appendf(nil, "%s\nformat %d\n", markerHeader, v), 0o644)
}

func vfsDefault() vfs.FS { return vfs.Default }
