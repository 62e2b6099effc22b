package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMoveUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"copy"},
		{"copy", "--from", "memory://"},
		{"copy", "--from", "memory://", "--to", "memory://", "--active", "maybe"},
		{"copy", "--from", "memory://", "--to", "memory://", "--state", "sleeping"},
		{"copy", "--from", "memory://", "--to", "memory://", "--batch", "5000"},
		{"export", "--backend", "memory://", "extra"},
		{"import", "--backend", "memory://", "a", "b"},
	} {
		_, _, err := run(t, args...)
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("kyu %v = %v; want a usage error", args, err)
		}
	}
}

// TestExportImportCopy moves jobs from one embedded store to others with
// the three commands, twice, and checks the summaries and --verify.
func TestExportImportCopy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := "pebble://" + filepath.Join(dir, "src")
	for _, typ := range []string{"a", "b", "c"} {
		if _, _, err := run(t, "enqueue", "--backend", src, "--queue", "mail", typ, `{"n":1}`); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := run(t, "queues", "pause", "mail", "--backend", src); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "jobs.jsonl")
	_, errOut, err := run(t, "export", "--backend", src, "--out", file)
	if err != nil || !strings.Contains(errOut, "exported 3 jobs and 1 queue settings") {
		t.Fatalf("export: %v\n%s", err, errOut)
	}
	b, err := os.ReadFile(file)
	if err != nil || !strings.HasPrefix(string(b), `{"kind":"kyu-export","version":1`) {
		t.Fatalf("the export begins %.60q (%v); want its header", b, err)
	}
	dst := "pebble://" + filepath.Join(dir, "dst")
	for _, want := range []string{"3 created, 0 already there", "0 created, 3 already there"} {
		out, errOut, err := run(t, "import", "--backend", dst, "--verify", file)
		if err != nil || !strings.Contains(errOut, want) || !strings.Contains(out, "verify: equal: 3 jobs") {
			t.Fatalf("import: %v; want %q and a verified copy\n%s%s", err, want, out, errOut)
		}
	}
	out, _, err := run(t, "queues", "--backend", dst, "-o", "json")
	if err != nil || !strings.Contains(out, `"paused":true`) {
		t.Fatalf("the target's queues after import: %v\n%s", err, out)
	}
	dst2 := "pebble://" + filepath.Join(dir, "dst2")
	for _, want := range []string{"3 created", "3 already there"} {
		out, errOut, err := run(t, "copy", "--from", src, "--to", dst2, "--verify")
		if err != nil || !strings.Contains(errOut, want) || !strings.Contains(out, "verify: equal") {
			t.Fatalf("copy: %v; want %q\n%s%s", err, want, out, errOut)
		}
	}
	if err := os.WriteFile(file, b[:len(b)-10], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "import", "--backend", "memory://", file); err == nil || !strings.Contains(err.Error(), "line 6") {
		t.Fatalf("import of a truncated file: %v; want an error naming line 6 (the end line)", err)
	}
}
