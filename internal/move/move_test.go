package move_test

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/internal/move"
)

// moveOptions moves active jobs as pending, at the tests' clock.
func moveOptions() move.Options {
	return move.Options{Active: move.ActivePending, Now: func() time.Time { return t0.Add(2 * time.Minute) }}
}

// TestCopyMatrix copies 1,000 jobs in every state, with logs, results,
// errors and unique keys, between pairs of stores (a Redis store keeps
// times at the millisecond, and is compared so), compares every job field
// by field via Get, and copies again to see nothing change. Each store is
// a source once and a target once.
func TestCopyMatrix(t *testing.T) {
	pairs := [][2]string{{"memory", "pebble"}, {"pebble", "postgres"}, {"postgres", "remote"}, {"remote", "redis"}, {"redis", "memory"}, {"memory", "mysql"}, {"mysql", "memory"}}
	copyPairs(t, pairs, 1000)
}

// TestCopyMatrixLarge is TestCopyMatrix with KYU_TEST_MOVE_JOBS jobs
// (10,000, say) on two pairs, the embedded store into PostgreSQL and
// Redis into MySQL; it is skipped when the variable is unset.
func TestCopyMatrixLarge(t *testing.T) {
	v := os.Getenv("KYU_TEST_MOVE_JOBS")
	if v == "" {
		t.Skip("set KYU_TEST_MOVE_JOBS=10000 to copy that many jobs on two pairs")
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("KYU_TEST_MOVE_JOBS=%q is not a count of jobs", v)
	}
	copyPairs(t, [][2]string{{"pebble", "postgres"}, {"redis", "mysql"}}, n)
}

// copyPairs runs the copy matrix's checks with n jobs on each pair.
func copyPairs(t *testing.T, pairs [][2]string, n int) {
	for _, pair := range pairs {
		t.Run(pair[0]+"-to-"+pair[1], func(t *testing.T) {
			src, dst := openStore(t, pair[0]), openStore(t, pair[1])
			ids := fill(t, src, n)
			o := moveOptions()
			sum, err := move.Copy(t.Context(), src, dst, o)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Created != int64(n) || sum.Same != 0 {
				t.Fatalf("first copy: %+v; want %d created", sum, n)
			}
			for _, id := range ids {
				a, err := src.Get(t.Context(), backend.GetParams{ID: id})
				if err != nil {
					t.Fatal(err)
				}
				if a.State == backend.StateActive {
					a = move.AsPending(a, t0)
				}
				b, err := dst.Get(t.Context(), backend.GetParams{ID: id})
				if err != nil {
					t.Fatalf("job %s (%s) in the target: %v", id, a.State, err)
				}
				prec := backend.ImportPrecision
				if pair[0] == "redis" || pair[1] == "redis" {
					prec = time.Millisecond // what Redis keeps
				}
				if f := backend.SameJobAt(a, b, prec); f != "" {
					t.Fatalf("job %s (%s): the target's %s differs:\n%+v\n%+v", id, a.State, f, a, b)
				}
			}
			want := counts(t, src)
			want[backend.StatePending] += want[backend.StateActive]
			want[backend.StateActive] = 0
			got := counts(t, dst)
			for _, s := range backend.States() {
				if got[s] != want[s] {
					t.Fatalf("target has %d %s jobs; want %d (all: %v, want %v)", got[s], s, want[s], got, want)
				}
				if s != backend.StateActive && want[s] == 0 {
					t.Fatalf("the source has no %s job: the test does not cover every state", s)
				}
			}
			sum, err = move.Copy(t.Context(), src, dst, o)
			if err != nil || sum.Created != 0 || sum.Same != int64(n) {
				t.Fatalf("second copy: %+v, %v; want %d same, nothing created", sum, err, n)
			}
			v, err := move.VerifyCopy(t.Context(), src, dst, o)
			if err != nil || !v.OK() {
				var buf bytes.Buffer
				v.Report(&buf)
				t.Fatalf("verify: %v\n%s", err, buf.String())
			}
		})
	}
}

// TestActiveRefused: by default a move refuses a source with active
// jobs, naming how many, and writes nothing.
func TestActiveRefused(t *testing.T) {
	src, dst := openStore(t, "memory"), openStore(t, "memory")
	fill(t, src, 70)
	_, err := move.Copy(t.Context(), src, dst, move.Options{})
	var ae *move.ActiveError
	if !errors.As(err, &ae) || ae.Count != counts(t, src)[backend.StateActive] || ae.Count == 0 {
		t.Fatalf("copy with active jobs: %v; want an *ActiveError naming %d jobs", err, counts(t, src)[backend.StateActive])
	}
	var buf bytes.Buffer
	if _, err := move.Export(t.Context(), src, &buf, move.Options{}); !errors.As(err, &ae) {
		t.Fatalf("export with active jobs: %v; want an *ActiveError", err)
	}
	for s, n := range counts(t, dst) {
		if n != 0 {
			t.Fatalf("the target holds %d %s jobs after a refused copy", n, s)
		}
	}
}
