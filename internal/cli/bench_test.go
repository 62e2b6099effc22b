package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kyuhq/kyu/internal/benchmark"
)

// tinyBench are flags that make a bench run take well under a second.
var tinyBench = []string{"--jobs", "20", "--batch", "7", "--concurrency", "2,3", "--latency-samples", "3", "--quiet"}

func TestBenchTable(t *testing.T) {
	t.Parallel()
	store := filepath.Join(t.TempDir(), "store")
	out, _, err := run(t, append([]string{"bench", "--backend", "pebble://" + store}, tinyBench...)...)
	if err != nil {
		t.Fatalf("kyu bench: %v", err)
	}
	for _, want := range []string{
		"kyu bench: pebble://" + store,
		"enqueue, 1 job per call, 10 goroutines",
		"enqueue, 7 jobs per call, 10 goroutines",
		"drain, 2 handlers",
		"drain, 3 handlers",
		"enqueue-to-start latency, idle worker, 3 samples",
		"sync floor, 256-byte append",
		"after a 5ms pause",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestBenchJSON(t *testing.T) {
	t.Parallel()
	store := filepath.Join(t.TempDir(), "store")
	out, stderr, err := run(t, append([]string{"bench", "--backend", store, "--json"}, tinyBench...)...)
	if err != nil {
		t.Fatalf("kyu bench --json: %v", err)
	}
	if stderr != "" {
		t.Errorf("--quiet still wrote to stderr:\n%s", stderr)
	}
	var rep benchmark.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not a JSON report: %v\n%s", err, out)
	}
	if rep.Jobs != 20 || rep.Enqueue.PerSecond <= 0 || rep.BatchEnqueue.PerSecond <= 0 ||
		len(rep.Drain) != 2 || rep.Drain[1].Concurrency != 3 || rep.Drain[1].PerSecond <= 0 ||
		rep.Latency.Samples != 3 || rep.Latency.P99 <= 0 {
		t.Fatalf("report lacks figures: %+v", rep)
	}
	if f := rep.SyncFloor; f == nil || f.Dir != store || f.BackToBack.Samples != 3 || f.AfterPause.P50 <= 0 {
		t.Fatalf("report lacks the sync floor in %s: %+v", store, f)
	}
}

// --claim-ahead reaches the draining workers and the report.
func TestBenchClaimAhead(t *testing.T) {
	t.Parallel()
	out, _, err := run(t, append([]string{"bench", "--backend", "memory://", "--claim-ahead", "5"}, tinyBench...)...)
	if err != nil {
		t.Fatalf("kyu bench --claim-ahead 5: %v", err)
	}
	if !strings.Contains(out, "drain, 3 handlers, 5 claimed ahead") {
		t.Errorf("output lacks the drain with 5 claimed ahead:\n%s", out)
	}
	if _, _, err := run(t, "bench", "--claim-ahead", "-1"); err == nil || !strings.Contains(err.Error(), "--claim-ahead: -1") {
		t.Errorf("kyu bench --claim-ahead -1: err = %v, want a usage error naming the flag", err)
	}
}

// A store that is not embedded gets no sync floor.
func TestBenchNoFloorOffDisk(t *testing.T) {
	t.Parallel()
	out, _, err := run(t, append([]string{"bench", "--backend", "memory://"}, tinyBench...)...)
	if err != nil {
		t.Fatalf("kyu bench: %v", err)
	}
	if !strings.Contains(out, "enqueue-to-start latency") || strings.Contains(out, "sync floor") {
		t.Fatalf("want a report without a sync floor:\n%s", out)
	}
}

// TestBenchTempStore runs bench without --backend: it must create its store
// under the temporary directory and remove it afterwards. (No t.Parallel:
// it sets TMPDIR.)
func TestBenchTempStore(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var out, stderr bytes.Buffer
	if err := Run(t.Context(), append([]string{"bench"}, tinyBench[:len(tinyBench)-1]...), &out, &stderr); err != nil {
		t.Fatalf("kyu bench: %v", err)
	}
	if !strings.Contains(out.String(), "in a temporary directory") {
		t.Errorf("output does not name the temporary store:\n%s", out.String())
	}
	if !strings.Contains(stderr.String(), "measuring drain") {
		t.Errorf("no progress on stderr:\n%s", stderr.String())
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("the temporary store was left behind: %v", left)
	}
}

func TestBenchUnreachableBackend(t *testing.T) {
	t.Parallel()
	_, _, err := run(t, "bench", "--backend", "mysql://kyu:hunter2@127.0.0.1:1/kyu?timeout=2s", "--quiet")
	if err == nil {
		t.Fatal("kyu bench --backend mysql://… on a closed port succeeded")
	}
	if code := ExitCode(err); code != ExitFailure {
		t.Fatalf("exit code %d, want %d", code, ExitFailure)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("the error repeats the password: %v", err)
	}
}

func TestBenchInterrupted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out, stderr bytes.Buffer
	err := Run(ctx, append([]string{"bench", "--backend", filepath.Join(t.TempDir(), "store")}, tinyBench...), &out, &stderr)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("kyu bench with a cancelled context: %v, want context.Canceled", err)
	}
	if code := ExitCode(err); code != ExitInterrupted {
		t.Fatalf("exit code %d, want %d", code, ExitInterrupted)
	}
}
