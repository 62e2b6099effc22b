package move_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/internal/move"
)

// crashEnv tells the test binary, run again as a child, to import
// FILE into the embedded store at DIR (the value is "FILE|DIR").
const crashEnv = "KYU_TEST_MOVE_CRASH_CHILD"

// TestImportCrashChild is the child of TestImportCrash: it imports in
// small batches and says after each how many jobs are durable.
func TestImportCrashChild(t *testing.T) {
	v := os.Getenv(crashEnv)
	if v == "" {
		t.Skip("run by TestImportCrash")
	}
	file, dir, _ := strings.Cut(v, "|")
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	dst := openPebble(t, dir)
	o := moveOptions()
	o.BatchJobs = 20
	o.Progress = func(done, _ int64) {
		fmt.Printf("done %d\n", done)
		time.Sleep(time.Millisecond) // leave the parent time to kill mid-import
	}
	if _, err := move.Import(t.Context(), dst, f, o); err != nil {
		t.Fatal(err)
	}
}

// TestImportCrash kills (SIGKILL) a process in the middle of an import
// into the embedded store, imports again, and finds every job exactly
// once and as exported.
func TestImportCrash(t *testing.T) {
	const n = 1400
	b := exportOf(t, n)
	file := filepath.Join(t.TempDir(), "export.jsonl")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestImportCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+file+"|"+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var durable int64
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "done "); ok {
			durable, _ = strconv.ParseInt(v, 10, 64)
			if durable >= 200 {
				break
			}
		}
	}
	if durable < 200 || durable >= n {
		t.Fatalf("the child reported %d jobs durable; want it killed between 200 and %d", durable, n)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	dst := openPebble(t, dir)
	before := counts(t, dst)
	var had int64
	for _, c := range before {
		had += c
	}
	if had < durable || had >= n {
		t.Fatalf("after the kill the store holds %d jobs; want at least the %d acknowledged and fewer than %d", had, durable, n)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sum, err := move.Import(t.Context(), dst, f, moveOptions())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Same != had || sum.Created != n-had {
		t.Fatalf("rerun: %+v; want %d already there and %d created", sum, had, n-had)
	}
	var total int64
	for _, c := range counts(t, dst) {
		total += c
	}
	if total != n {
		t.Fatalf("the store holds %d jobs after the rerun; want %d, each once", total, n)
	}
	v, err := move.VerifyImport(t.Context(), bytes.NewReader(b), dst, moveOptions())
	if err != nil || !v.OK() {
		var r bytes.Buffer
		v.Report(&r)
		t.Fatalf("verify: %v\n%s", err, r.String())
	}
}
