package move_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/internal/move"
)

// exportOf fills a memory store with n jobs and returns its export.
func exportOf(t *testing.T, n int) []byte {
	t.Helper()
	src := openStore(t, "memory")
	fill(t, src, n)
	var buf bytes.Buffer
	if _, err := move.Export(t.Context(), src, &buf, moveOptions()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// importBytes imports b into dst through a file, as kyu import does.
func importBytes(t *testing.T, dst backend.Backend, b []byte) (move.Summary, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return move.Import(t.Context(), dst, f, moveOptions())
}

// empty fails the test when dst holds a job or a queue.
func empty(t *testing.T, dst backend.Backend, why string) {
	t.Helper()
	st, err := dst.Stats(t.Context(), backend.StatsParams{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range st.Queues {
		for s, n := range q.Counts {
			if n != 0 {
				t.Fatalf("the target holds %d %s jobs in %s, but %s", n, s, q.Name, why)
			}
		}
		if q.Settings.Paused {
			t.Fatalf("queue %s was changed, but %s", q.Name, why)
		}
	}
}

func TestImportRoundTrip(t *testing.T) {
	b := exportOf(t, 140)
	dst := openStore(t, "pebble")
	sum, err := importBytes(t, dst, b)
	if err != nil || sum.Created != 140 {
		t.Fatalf("import: %+v, %v; want 140 created", sum, err)
	}
	sum, err = importBytes(t, dst, b)
	if err != nil || sum.Same != 140 || sum.Created != 0 {
		t.Fatalf("second import: %+v, %v; want 140 already there", sum, err)
	}
	v, err := move.VerifyImport(t.Context(), bytes.NewReader(b), dst, moveOptions())
	if err != nil || !v.OK() {
		var r bytes.Buffer
		v.Report(&r)
		t.Fatalf("verify: %v\n%s", err, r.String())
	}
}

func TestImportBadInput(t *testing.T) {
	good := exportOf(t, 70)
	lines := strings.SplitAfter(string(good), "\n")
	lines = lines[:len(lines)-1] // the empty string after the last newline
	with := func(i int, line string) []byte {
		c := append([]string(nil), lines...)
		c[i] = line
		return []byte(strings.Join(c, ""))
	}
	cases := []struct {
		name  string
		input []byte
		line  int64
		want  string
	}{
		{"cut mid-line", good[:len(good)/2], -1, "cut short"},
		{"no end line", []byte(strings.Join(lines[:len(lines)-1], "")), int64(len(lines)), "cut short"},
		{"not a job", with(10, `{"hello":"world"}`+"\n"), 11, "not a job"},
		{"not JSON", with(10, "hello\n"), 11, "not a JSON object"},
		{"a job with a bad field", with(10, strings.Replace(lines[10], `"state":"`, `"state":"x`, 1)), 11, "state"},
		{"future version", with(0, strings.Replace(lines[0], `"version":1`, `"version":2`, 1)), 1, "format version 2"},
		{"no header", []byte(strings.Join(lines[1:], "")), 1, "no header"},
		{"empty", nil, 1, "empty input"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := openStore(t, "memory")
			_, err := importBytes(t, dst, c.input)
			var le *move.LineError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), c.want) || (c.line > 0 && le.Line != c.line) {
				t.Fatalf("import: %v; want a *LineError at line %d saying %q", err, c.line, c.want)
			}
			empty(t, dst, "the input was refused")
		})
	}
	t.Run("a different job under the same id", func(t *testing.T) {
		dst := openStore(t, "memory")
		if _, err := importBytes(t, dst, good); err != nil {
			t.Fatal(err)
		}
		line := lines[20]
		id := line[len(`{"id":"`) : len(`{"id":"`)+36]
		before, err := dst.Get(t.Context(), backend.GetParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		sum, err := importBytes(t, dst, with(20, strings.Replace(line, `"title":"job`, `"title":"another job`, 1)))
		var ce *move.ConflictError
		if !errors.As(err, &ce) || ce.Count != 1 || !strings.Contains(err.Error(), "line 21") || !strings.Contains(err.Error(), id) || sum.Same != 69 {
			t.Fatalf("import of a changed job: %+v, %v; want one conflict naming line 21 and %s, 69 already there", sum, err, id)
		}
		after, err := dst.Get(t.Context(), backend.GetParams{ID: id})
		if err != nil || backend.SameJob(before, after) != "" {
			t.Fatalf("the target's job changed after a conflict: %v", err)
		}
	})
}
