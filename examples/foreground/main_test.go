package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestForegroundExitsAfterResult runs the example as its doc says: it
// prints the job's result and logs, and returns on its own.
func TestForegroundExitsAfterResult(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- run(t.Context(), filepath.Join(t.TempDir(), dataDir), &out) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("foreground still running a minute on; it should exit after the result")
	}
	for _, want := range []string{`completed: "HELLO FROM KYU", progress 100%`, "upper-cased 3 words"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
}
