package benchmark

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

func TestMeasureSyncFloor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f, err := measureSyncFloor(t.Context(), dir, 20, time.Millisecond)
	if err != nil {
		t.Fatalf("measureSyncFloor: %v", err)
	}
	if f.Dir != dir || f.Call != syncCall || f.WriteBytes != 256 || f.Pause != time.Millisecond {
		t.Errorf("floor = %+v, want %s, %s, 256 bytes, 1ms pause", f, dir, syncCall)
	}
	for name, l := range map[string]Latency{"BackToBack": f.BackToBack, "AfterPause": f.AfterPause} {
		if l.Samples != 20 || l.P50 <= 0 || l.P99 < l.P50 || l.Max < l.P99 {
			t.Errorf("%s = %+v, want 20 samples with positive, ordered percentiles", name, l)
		}
	}
	assertEmpty(t, dir)
}

// A cancelled measurement stops and still removes its scratch file.
func TestMeasureSyncFloorCancelled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := measureSyncFloor(ctx, dir, 1000, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("measureSyncFloor with a cancelled context: %v, want context.Canceled", err)
	}
	assertEmpty(t, dir)
}

// assertEmpty fails t unless dir holds nothing.
func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("the scratch file was left behind: %v", left)
	}
}
