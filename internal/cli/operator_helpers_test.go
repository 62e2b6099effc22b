package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend/backendurl"
)

// opWait bounds every wait of the operator command tests.
const opWait = 30 * time.Second

// eachStore runs fn once against an embedded store in a temporary
// directory and once against a kyu server started for it, with the URL
// of the store.
func eachStore(t *testing.T, fn func(t *testing.T, url string)) {
	t.Helper()
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		fn(t, "pebble://"+filepath.Join(t.TempDir(), "store"))
	})
	t.Run("server", func(t *testing.T) {
		t.Parallel()
		base, stop := serveCLI(t)
		t.Cleanup(func() {
			if err := stop(); err != nil {
				t.Error(err)
			}
		})
		fn(t, base)
	})
}

// kyuCmd runs the kyu command line against the store at url with stdin,
// and returns what it wrote.
func kyuCmd(t *testing.T, url, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = runWithInput(t.Context(), append(args, "--backend", url), strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

// mustKyu runs a command that must succeed and returns its stdout.
func mustKyu(t *testing.T, url string, args ...string) string {
	t.Helper()
	out, errOut, err := kyuCmd(t, url, "", args...)
	if err != nil {
		t.Fatalf("kyu %q: %v (stderr %q)", args, err, errOut)
	}
	return out
}

// jsonLines decodes each line of out into a T.
func jsonLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var all []T
	for line := range strings.Lines(out) {
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %q is not JSON: %v", line, err)
		}
		all = append(all, v)
	}
	return all
}

// tableRows splits a table into its header's columns and its rows' cells.
func tableRows(t *testing.T, out string) (header []string, rows [][]string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatalf("no table in %q", out)
	}
	// Columns are split on two spaces or more; headers hold single spaces.
	split := func(l string) []string {
		var cells []string
		for c := range strings.SplitSeq(l, "  ") {
			if c = strings.TrimSpace(c); c != "" {
				cells = append(cells, c)
			}
		}
		return cells
	}
	header = split(lines[0])
	for _, l := range lines[1:] {
		rows = append(rows, split(l))
	}
	return header, rows
}

// startWorker opens the store at url and runs a worker with mux on the
// given queues (nil: the default queue). stop shuts it down and closes
// the store (an embedded store is then free for the commands again).
func startWorker(t *testing.T, url string, mux *kyu.Mux, queues map[string]int) (c *kyu.Client, stop func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), opWait)
	b, err := backendurl.Open(ctx, url, backendurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := kyu.NewWorker(b, kyu.WorkerConfig{Handler: mux, Queues: queues, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			defer cancel()
			if err := w.Shutdown(ctx); err != nil {
				t.Errorf("worker shutdown: %v", err)
			}
			if err := b.Close(); err != nil {
				t.Errorf("close store: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return kyu.NewClient(b, kyu.ClientConfig{WaitPollInterval: 50 * time.Millisecond}), stop
}

// runWorker runs a worker with mux until every job of ids is finished,
// then stops it.
func runWorker(t *testing.T, url string, mux *kyu.Mux, queues map[string]int, ids ...string) {
	t.Helper()
	c, stop := startWorker(t, url, mux, queues)
	defer stop()
	for _, id := range ids {
		if _, err := c.Wait(t.Context(), id); err != nil {
			t.Fatalf("wait for job %s: %v", id, err)
		}
	}
}

// eventually polls cond until it holds, failing the test at opWait.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(opWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, opWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// syncBuffer is a buffer a command writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls the buffer until it contains s, failing at opWait.
func (b *syncBuffer) waitFor(t *testing.T, s string) {
	t.Helper()
	eventually(t, fmt.Sprintf("output holding %q", s), func() bool { return strings.Contains(b.String(), s) })
}

// startKyu runs a long command (--follow, --watch) in the background
// against url; cancel stands for Ctrl-C, and done gives Run's error.
func startKyu(t *testing.T, url string, args ...string) (out *syncBuffer, cancel func(), done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	out = new(syncBuffer)
	ch := make(chan error, 1)
	go func() { ch <- Run(ctx, append(args, "--backend", url), out, &syncBuffer{}) }()
	return out, cancel, ch
}

// ended waits for a command started by startKyu to return.
func ended(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(opWait):
		t.Fatal("the command did not end")
		return errors.New("unreachable")
	}
}
