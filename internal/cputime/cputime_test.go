//go:build unix

package cputime_test

import (
	"testing"
	"time"

	"github.com/kyuhq/kyu/internal/cputime"
)

// Busy work raises the process's CPU time: it passes 5 ms well before 10 s
// of wall time, however busy the machine is.
func TestProcessCountsBusyWork(t *testing.T) {
	before := cputime.Process()
	if before <= 0 {
		t.Fatalf("CPU time %v at the start of a test, want more than 0", before)
	}
	deadline := time.Now().Add(10 * time.Second)
	for x := 0; cputime.Process()-before < 5*time.Millisecond; x++ {
		if time.Now().After(deadline) {
			t.Fatalf("10 s of busy work (%d loops) raised the CPU time by %v", x, cputime.Process()-before)
		}
	}
}
