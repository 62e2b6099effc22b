package move

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// VerifyPrecision is the precision at which Verify compares times: the
// coarsest a store keeps (Redis keeps milliseconds).
const VerifyPrecision = time.Millisecond

// Verification compares the moved jobs with the target's: counts per
// queue and state on each side, and a checksum of every job's content in
// the order of the source.
type Verification struct {
	Jobs int64
	// Source and Target count the jobs per "queue/state".
	Source, Target map[string]int64
	// SourceSum and TargetSum are SHA-256 checksums of every job's
	// content (times at VerifyPrecision), in the source's order; a job
	// missing from the target counts as empty there.
	SourceSum, TargetSum string
	// Missing counts jobs the target does not hold, Differ jobs it holds
	// otherwise; Problems lists the first of either.
	Missing, Differ int64
	Problems        []string
}

// OK reports whether both sides agree.
func (v *Verification) OK() bool {
	return v.Missing == 0 && v.Differ == 0 && v.SourceSum == v.TargetSum && maps.Equal(v.Source, v.Target)
}

// Report writes the verification for a person.
func (v *Verification) Report(w io.Writer) {
	verdict := "equal"
	if !v.OK() {
		verdict = "DIFFERENT"
	}
	fmt.Fprintf(w, "verify: %s: %d jobs; checksum source %s, target %s; %d missing, %d different\n",
		verdict, v.Jobs, short(v.SourceSum), short(v.TargetSum), v.Missing, v.Differ)
	keys := slices.Sorted(maps.Keys(v.Source))
	for k := range v.Target {
		if _, ok := v.Source[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		mark := ""
		if v.Source[k] != v.Target[k] {
			mark = "  <- differs"
		}
		fmt.Fprintf(w, "  %-40s source %8d  target %8d%s\n", k, v.Source[k], v.Target[k], mark)
	}
	for _, p := range v.Problems {
		fmt.Fprintf(w, "  %s\n", p)
	}
}

func short(s string) string {
	if len(s) > 16 {
		return s[:16]
	}
	return s
}

// verifier builds a Verification batch by batch.
type verifier struct {
	dst      backend.Backend
	readers  int
	v        Verification
	src, dsh hash.Hash
}

func newVerifier(dst backend.Backend, readers int) *verifier {
	return &verifier{dst: dst, readers: readers, src: sha256.New(), dsh: sha256.New(),
		v: Verification{Source: map[string]int64{}, Target: map[string]int64{}}}
}

// add compares a batch of moved jobs with the target's.
func (vf *verifier) add(ctx context.Context, jobs []*backend.Job) error {
	got, err := getAll(ctx, vf.dst, jobs, vf.readers)
	if err != nil {
		return err
	}
	for i, j := range jobs {
		vf.v.Jobs++
		vf.v.Source[j.Queue+"/"+string(j.State)]++
		writeContent(vf.src, j)
		t := got[i]
		if t == nil {
			vf.v.Missing++
			vf.problem("job %s: missing in the target", j.ID)
			vf.dsh.Write([]byte{0})
			continue
		}
		vf.v.Target[t.Queue+"/"+string(t.State)]++
		writeContent(vf.dsh, t)
		if f := backend.SameJobAt(j, t, VerifyPrecision); f != "" {
			vf.v.Differ++
			vf.problem("job %s: the target's %s differs", j.ID, f)
		}
	}
	return nil
}

func (vf *verifier) problem(format string, args ...any) {
	if len(vf.v.Problems) < 20 {
		vf.v.Problems = append(vf.v.Problems, fmt.Sprintf(format, args...))
	}
}

func (vf *verifier) done() Verification {
	vf.v.SourceSum = hex.EncodeToString(vf.src.Sum(nil))
	vf.v.TargetSum = hex.EncodeToString(vf.dsh.Sum(nil))
	return vf.v
}

// writeContent writes a job's content, normalized, to h.
func writeContent(h hash.Hash, j *backend.Job) {
	b, _ := json.Marshal(backend.NormalizeJobAt(j, VerifyPrecision))
	h.Write(b)
	h.Write([]byte{'\n'})
}

// VerifyCopy compares the jobs the options choose in src with dst's.
func VerifyCopy(ctx context.Context, src, dst backend.Backend, o Options) (Verification, error) {
	if err := o.defaults(); err != nil {
		return Verification{}, err
	}
	o.Active = ActivePending // compare an active job as it was moved
	vf := newVerifier(dst, o.Readers)
	err := readJobs(ctx, src, &o, func(jobs []*backend.Job) error { return vf.add(ctx, jobs) })
	return vf.done(), err
}

// VerifyImport compares the jobs of an export with dst's.
func VerifyImport(ctx context.Context, r io.Reader, dst backend.Backend, o Options) (Verification, error) {
	if err := o.defaults(); err != nil {
		return Verification{}, err
	}
	vf := newVerifier(dst, o.Readers)
	_, err := scan(r, &o, nil, func(jobs []*backend.Job, _ []int64) error { return vf.add(ctx, jobs) })
	return vf.done(), err
}
