package benchmark

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/memory"
	"github.com/kyuhq/kyu/backend/pebble"
	"github.com/kyuhq/kyu/internal/cpupressure"
)

// openStore opens a fresh embedded store that the test closes.
func openStore(tb testing.TB) *pebble.Store {
	tb.Helper()
	s, _ := openStoreDir(tb)
	return s
}

// openStoreDir is openStore that also returns the store's directory.
func openStoreDir(tb testing.TB) (*pebble.Store, string) {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "store")
	s, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close store: %v", err)
		}
	})
	return s, dir
}

// tiny is a Config that runs in well under a second.
func tiny() Config {
	return Config{
		Jobs:           40,
		PayloadBytes:   16,
		Producers:      3,
		Batch:          7,
		Concurrency:    []int{2, 5},
		LatencySamples: 5,
		LatencyGap:     time.Millisecond,
	}
}

func TestRun(t *testing.T) {
	t.Parallel()
	store, dir := openStoreDir(t)
	cfg := tiny()
	cfg.StoreDir = dir
	rep, err := Run(t.Context(), store, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	positive := func(name string, th Throughput) {
		t.Helper()
		if th.Jobs != 40 || th.Elapsed <= 0 || th.PerSecond <= 0 {
			t.Errorf("%s = %+v, want 40 jobs at a positive rate", name, th)
		}
	}
	positive("Enqueue", rep.Enqueue)
	positive("BatchEnqueue", rep.BatchEnqueue)
	if rep.Enqueue.Calls != 40 || rep.BatchEnqueue.Calls != 6 {
		t.Errorf("calls = %d and %d, want 40 and 6", rep.Enqueue.Calls, rep.BatchEnqueue.Calls)
	}
	if len(rep.Drain) != 2 {
		t.Fatalf("Drain has %d figures, want 2", len(rep.Drain))
	}
	for i, want := range []int{2, 5} {
		if rep.Drain[i].Concurrency != want {
			t.Errorf("Drain[%d].Concurrency = %d, want %d", i, rep.Drain[i].Concurrency, want)
		}
		positive("Drain", rep.Drain[i].Throughput)
	}
	l := rep.Latency
	if l.Samples != 5 || l.P50 <= 0 || l.P99 < l.P50 || l.Max < l.P99 {
		t.Errorf("Latency = %+v, want 5 ordered positive figures", l)
	}

	if f := rep.SyncFloor; f == nil || f.Dir != dir || f.BackToBack.Samples != 5 || f.AfterPause.Samples != 5 || f.Pause != time.Millisecond {
		t.Errorf("SyncFloor = %+v, want 5 samples each way in %s after 1ms pauses", f, dir)
	}

	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatalf("WriteText: %v", err)
	}
	for _, want := range []string{
		"enqueue, 1 job per call, 3 goroutines", "drain, 5 handlers", "p99",
		"sync floor, 256-byte append + " + syncCall + " in the store's directory, 5 samples each",
		"back to back", "a 1-job enqueue call, 3 goroutines: mean", "after a 1ms pause", "enqueue-to-start: p50",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, text.String())
		}
	}

	// Where the system reports CPU pressure, every figure has its share,
	// and the table its column.
	if cpupressure.Read().Reported() {
		if !strings.Contains(text.String(), "cpu wait") {
			t.Errorf("table lacks the cpu wait column:\n%s", text.String())
		}
		shares := map[string]*float64{"Enqueue": rep.Enqueue.CPUWait, "BatchEnqueue": rep.BatchEnqueue.CPUWait, "Latency": l.CPUWait}
		for i, d := range rep.Drain {
			shares["Drain "+strconv.Itoa(i)] = d.CPUWait
		}
		for name, w := range shares {
			if w == nil || *w < 0 || *w > 1 {
				t.Errorf("%s.CPUWait = %v, want a share in [0, 1]", name, w)
			}
		}
	}
}

// TestRunLeavesNothingPending checks that every job a run enqueued ran,
// also with a single drain (the second filled queue is run off unmeasured).
func TestRunLeavesNothingPending(t *testing.T) {
	t.Parallel()
	store := openStore(t)
	cfg := tiny()
	cfg.Concurrency = []int{3}
	cfg.Keep = true // the purge would remove pending jobs too
	rep, err := Run(t.Context(), store, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var queues []string
	for _, q := range []string{"enqueue", "batch", "latency"} {
		queues = append(queues, "kyu-bench-"+rep.RunID+"-"+q)
	}
	res, err := store.Claim(t.Context(), backend.ClaimParams{
		Queues: queues, Max: 1, Lease: time.Minute, WorkerID: "test", Now: time.Now(),
	})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if len(res.Jobs) != 0 {
		t.Fatalf("a job was left pending: %+v", res.Jobs[0])
	}
}

func TestRunValidates(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{Jobs: -1},
		{Batch: -5},
		{Concurrency: []int{10, 0}},
		{PayloadBytes: -1},
		{LatencyGap: -time.Second},
	} {
		if _, err := Run(t.Context(), nil, cfg); err == nil {
			t.Errorf("Run(%+v) succeeded, want a validation error", cfg)
		}
	}
}

func TestRunCancelled(t *testing.T) {
	t.Parallel()
	store := openStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Run(ctx, store, tiny()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with a cancelled context: %v, want context.Canceled", err)
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i))
	}
	l := newLatency(s)
	if l.P50 != 50 || l.P99 != 99 || l.Max != 100 || l.Mean != 50 {
		t.Fatalf("newLatency(1..100) = %+v, want p50 50, p99 99, max 100, mean 50", l)
	}
	if l := newLatency([]time.Duration{7}); l.P50 != 7 || l.P99 != 7 {
		t.Fatalf("newLatency([7]) = %+v", l)
	}
}

// BenchmarkRun runs the whole measurement with b.N jobs per figure and
// reports each figure as a metric:
//
//	go test -run '^$' -bench Run -benchtime 20000x ./internal/benchmark
func BenchmarkRun(b *testing.B) {
	store := openStore(b)
	cfg := Config{Jobs: b.N, LatencySamples: 100, Keep: true} // the store is the test's own
	b.ResetTimer()
	rep, err := Run(b.Context(), store, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(0, "ns/op") // one Run is not an operation
	b.ReportMetric(rep.Enqueue.PerSecond, "enqueue/s")
	b.ReportMetric(rep.BatchEnqueue.PerSecond, "batch-enqueue/s")
	for _, d := range rep.Drain {
		b.ReportMetric(d.PerSecond, "drain-c"+strconv.Itoa(d.Concurrency)+"/s")
	}
	b.ReportMetric(float64(rep.Latency.P50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(rep.Latency.P99.Microseconds()), "p99-µs")
}

// A report without CPU pressure readings (a system that does not report
// them) has no cpu wait column.
func TestWriteTextWithoutCPUWait(t *testing.T) {
	t.Parallel()
	rep := Report{Jobs: 10, Producers: 1, Batch: 5, Enqueue: newThroughput(10, 10, time.Second), Drain: []Drain{{Concurrency: 2, Throughput: newThroughput(10, 0, time.Second)}}}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text.String(), "sync floor") {
		t.Fatalf("report without a floor mentions it:\n%s", text.String())
	}
	if strings.Contains(text.String(), "cpu wait") || strings.Contains(text.String(), " - ") {
		t.Fatalf("report without readings mentions cpu wait:\n%s", text.String())
	}
	share := 0.25
	rep.Drain[0].CPUWait = &share
	text.Reset()
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "cpu wait") || !strings.Contains(text.String(), "25 %") {
		t.Fatalf("report with a reading lacks it:\n%s", text.String())
	}
}

// A run purges its queues' jobs when it ends, unless Keep is set.
func TestRunPurgesItsJobs(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		store := openStore(t)
		cfg := tiny()
		cfg.Keep = keep
		rep, err := Run(t.Context(), store, cfg)
		if err != nil {
			t.Fatalf("Run (keep %v): %v", keep, err)
		}
		left := 0
		for _, q := range []string{"enqueue", "batch", "latency"} {
			page, err := store.List(t.Context(), backend.ListParams{Queue: "kyu-bench-" + rep.RunID + "-" + q, Limit: 100})
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			left += len(page.Jobs)
		}
		switch {
		case !keep && left != 0:
			t.Errorf("a run without Keep left %d jobs in its queues", left)
		case keep && left == 0:
			t.Errorf("a run with Keep left no jobs in its queues")
		}
	}
}

// Without a StoreDir (a store served elsewhere) a run measures no floor.
func TestRunWithoutStoreDir(t *testing.T) {
	t.Parallel()
	rep, err := Run(t.Context(), memory.New(), tiny())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.SyncFloor != nil {
		t.Fatalf("SyncFloor = %+v, want none", rep.SyncFloor)
	}
	out, err := json.Marshal(&rep)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "sync_floor") {
		t.Fatalf("JSON report has a sync floor: %s", out)
	}
}
