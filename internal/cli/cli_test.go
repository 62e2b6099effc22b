package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kyuhq/kyu"
)

// run calls Run with args and returns what it wrote.
func run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = Run(t.Context(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"--help"}, {"help"}, {"help", "bench"}, {"bench", "--help"}, {"server", "--help"}} {
		out, _, err := run(t, args...)
		if err != nil {
			t.Fatalf("kyu %v: %v", args, err)
		}
		if !strings.Contains(out, "Usage:") {
			t.Fatalf("kyu %v printed no usage:\n%s", args, out)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"nosuchcommand"},
		{"--nosuchflag"},
		{"version", "extra"},
		{"bench", "--jobs", "many"},
		{"bench", "--concurrency", "10,x"},
		{"bench", "--jobs", "0"},
		{"bench", "--batch", "-1"},
		{"bench", "--payload", "-1"},
		{"bench", "--payload", "999999999"},
		{"bench", "--concurrency", "10,0"},
		{"bench", "--concurrency", ""},
		{"bench", "--latency-samples", "0"},
		{"bench", "stray-argument"},
		{"server", "stray-argument"},
		{"jobs", "nosuchcommand"},
		{"jobs", "get"},
		{"jobs", "retry"},
		{"queues", "nosuchcommand"},
		{"queues", "pause"},
		{"queues", "purge", "q", "--state", "sleeping"},
		{"stats", "--interval", "0s"},
		{"jobs", "logs", "x", "--interval", "-1s"},
		{"workers", "-o", "xml"},
		{"server", "--addr"},
		{"server", "--insecure=maybe"},
		{"server", "--addr", "127.0.0.1:0", "--backend", "pebble://" + t.TempDir(), "--tls-cert", "only-a-cert.pem"},
	} {
		_, _, err := run(t, args...)
		var usage *UsageError
		if !errors.As(err, &usage) {
			t.Fatalf("kyu %q: error %v, want a *UsageError", args, err)
		}
		if code := ExitCode(err); code != ExitUsage {
			t.Fatalf("kyu %q: exit code %d, want %d", args, code, ExitUsage)
		}
	}
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("boom"), ExitFailure},
		{&UsageError{Err: errors.New("bad flag")}, ExitUsage},
		{fmt.Errorf("bench: %w", context.Canceled), ExitInterrupted},
		{fmt.Errorf("bench: %w", context.DeadlineExceeded), ExitFailure},
		{fmt.Errorf("jobs get: %w", kyu.ErrNotFound), ExitNotFound},
	}
	for _, tt := range tests {
		if got := ExitCode(tt.err); got != tt.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	out, _, err := run(t, "completion", "bash")
	if err != nil {
		t.Fatalf("kyu completion bash: %v", err)
	}
	if !strings.Contains(out, "bash completion") {
		t.Fatalf("kyu completion bash printed no script:\n%.200s", out)
	}
}
