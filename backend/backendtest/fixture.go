package backendtest

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// t0 is the start of every subtest's timeline. It is far from the wall
// clock on purpose: a store that reads its own clock fails loudly.
var t0 = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

const (
	testType  = "conformance.job"
	testLease = 5 * time.Minute
	workerID  = "conformance-worker"
)

// fixture bundles one subtest's store, its timeline and its queue.
type fixture struct {
	t     *testing.T
	b     backend.Backend
	ctx   context.Context
	now   time.Time // the caller's clock for every call the helpers make
	queue string    // a queue name no other subtest uses
}

var notQueueChars = regexp.MustCompile(`[^A-Za-z0-9._:-]+`)

// start marks the subtest parallel and gives it a fresh store at t0.
func start(t *testing.T, factory Factory) *fixture {
	t.Helper()
	t.Parallel()
	b := factory(t)
	if b == nil {
		t.Fatal("factory returned a nil backend")
	}
	return &fixture{t: t, b: b, ctx: t.Context(), now: t0, queue: uniqueQueue(t, "")}
}

// uniqueQueue names a queue after the test and suffix: distinct for every
// subtest and suffix, within the legal queue-name length.
func uniqueQueue(t *testing.T, suffix string) string {
	name := notQueueChars.ReplaceAllString(t.Name(), "-")
	if len(name) > 90 {
		name = fmt.Sprintf("%08x-%s", crc32.ChecksumIEEE([]byte(name)), name[len(name)-80:])
	}
	return name + suffix
}

// at sets the clock to t0+d and returns it.
func (f *fixture) at(d time.Duration) time.Time {
	f.now = t0.Add(d)
	return f.now
}

// advance moves the clock forward by d and returns it.
func (f *fixture) advance(d time.Duration) time.Time {
	f.now = f.now.Add(d)
	return f.now
}

// fill gives j the suite's type and queue where they are empty.
func (f *fixture) fill(j backend.NewJob) backend.NewJob {
	if j.Type == "" {
		j.Type = testType
	}
	if j.Queue == "" {
		j.Queue = f.queue
	}
	return j
}

// enqueue writes jobs at f.now (type and queue filled in) and fails the
// test on error.
func (f *fixture) enqueue(jobs ...backend.NewJob) []backend.EnqueuedJob {
	f.t.Helper()
	p := backend.EnqueueParams{Now: f.now}
	for _, j := range jobs {
		p.Jobs = append(p.Jobs, f.fill(j))
	}
	res, err := f.b.Enqueue(f.ctx, p)
	if err != nil {
		f.t.Fatalf("Enqueue of %d jobs: %v", len(jobs), err)
	}
	if len(res.Jobs) != len(jobs) {
		f.t.Fatalf("Enqueue of %d jobs returned %d results; want one per job", len(jobs), len(res.Jobs))
	}
	for i, r := range res.Jobs {
		if r.ID == "" {
			f.t.Fatalf("Enqueue result %d has an empty id", i)
		}
	}
	return res.Jobs
}

// enqueueOne writes one job that must not be a duplicate and returns its id.
func (f *fixture) enqueueOne(j backend.NewJob) string {
	f.t.Helper()
	r := f.enqueue(j)[0]
	if r.Duplicate {
		f.t.Fatalf("Enqueue reported a duplicate of %s; want a new job", r.ID)
	}
	return r.ID
}

// enqueueN writes n plain jobs into f.queue, one call each, and returns
// their ids in enqueue order.
func (f *fixture) enqueueN(n int) []string {
	f.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = f.enqueueOne(backend.NewJob{})
	}
	return ids
}

// claimParams claims from f.queue at f.now with the suite's lease.
func (f *fixture) claimParams(max int) backend.ClaimParams {
	return backend.ClaimParams{Queues: []string{f.queue}, Max: max, Lease: testLease, WorkerID: workerID, Now: f.now}
}

// claimWith claims with p and fails the test on error.
func (f *fixture) claimWith(p backend.ClaimParams) []*backend.Job {
	f.t.Helper()
	res, err := f.b.Claim(f.ctx, p)
	if err != nil {
		f.t.Fatalf("Claim(%v, max %d) at %s: %v", p.Queues, p.Max, stamp(p.Now), err)
	}
	if len(res.Jobs) > p.Max {
		f.t.Fatalf("Claim(max %d) returned %d jobs", p.Max, len(res.Jobs))
	}
	for _, j := range res.Jobs {
		if j == nil {
			f.t.Fatal("Claim returned a nil job")
		}
		if j.State != backend.StateActive {
			f.t.Errorf("claimed job %s has state %q; want active", j.ID, j.State)
		}
	}
	return res.Jobs
}

// claim claims up to max jobs from f.queue at f.now.
func (f *fixture) claim(max int) []*backend.Job {
	f.t.Helper()
	return f.claimWith(f.claimParams(max))
}

// claimOne claims exactly one job from f.queue; none is a failure.
func (f *fixture) claimOne() *backend.Job {
	f.t.Helper()
	jobs := f.claim(1)
	if len(jobs) != 1 {
		f.t.Fatalf("Claim at %s returned %d jobs; want 1", stamp(f.now), len(jobs))
	}
	return jobs[0]
}

// claimNothing asserts that f.queue has nothing claimable at f.now.
func (f *fixture) claimNothing(why string) {
	f.t.Helper()
	if jobs := f.claim(10); len(jobs) > 0 {
		f.t.Fatalf("Claim at %s handed out %d job(s) (first %s, attempt %d); want none: %s",
			stamp(f.now), len(jobs), jobs[0].ID, jobs[0].Attempt, why)
	}
}

// claimID claims one job and checks that it is id.
func (f *fixture) claimID(id, why string) *backend.Job {
	f.t.Helper()
	j := f.claimOne()
	if j.ID != id {
		f.t.Fatalf("Claim returned %s; want %s: %s", j.ID, id, why)
	}
	return j
}

// get reads a job and fails the test on error.
func (f *fixture) get(id string) *backend.Job {
	f.t.Helper()
	j, err := f.b.Get(f.ctx, backend.GetParams{ID: id})
	if err != nil {
		f.t.Fatalf("Get(%s): %v", id, err)
	}
	if j == nil {
		f.t.Fatalf("Get(%s) returned a nil job and no error", id)
	}
	return j
}

// wantState reads a job and checks its state.
func (f *fixture) wantState(id string, want backend.State, why string) *backend.Job {
	f.t.Helper()
	j := f.get(id)
	if j.State != want {
		f.t.Fatalf("job %s is %q; want %q: %s", id, j.State, want, why)
	}
	return j
}

// wantGone checks that Get reports ErrNotFound for id.
func (f *fixture) wantGone(id, why string) {
	f.t.Helper()
	j, err := f.b.Get(f.ctx, backend.GetParams{ID: id})
	if !errors.Is(err, backend.ErrNotFound) {
		state := backend.State("")
		if j != nil {
			state = j.State
		}
		f.t.Fatalf("Get(%s) = (state %q, err %v); want ErrNotFound: %s", id, state, err, why)
	}
}

// lease is the lease a claim handed out.
func lease(j *backend.Job) backend.Lease { return backend.Lease{JobID: j.ID, Token: j.LeaseToken} }

// only unpacks a one-item BatchResult.
func (f *fixture) only(op string, res backend.BatchResult, err error) error {
	f.t.Helper()
	if err != nil {
		f.t.Fatalf("%s: %v", op, err)
	}
	if len(res.Errors) != 1 {
		f.t.Fatalf("%s of one item returned %d item errors; want 1", op, len(res.Errors))
	}
	return res.Errors[0]
}

// complete finishes l at f.now and returns the item's error.
func (f *fixture) complete(l backend.Lease, result []byte) error {
	f.t.Helper()
	res, err := f.b.Complete(f.ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: l, Result: result}}, Now: f.now})
	return f.only("Complete", res, err)
}

// fail ends the attempt of item.Lease at f.now and returns the item's error.
func (f *fixture) fail(item backend.FailItem) error {
	f.t.Helper()
	res, err := f.b.Fail(f.ctx, backend.FailParams{Items: []backend.FailItem{item}, Now: f.now})
	return f.only("Fail", res, err)
}

// release hands l back at f.now and returns the item's error.
func (f *fixture) release(l backend.Lease) error {
	f.t.Helper()
	res, err := f.b.Release(f.ctx, backend.ReleaseParams{Leases: []backend.Lease{l}, Now: f.now})
	return f.only("Release", res, err)
}

// heartbeat extends l by extend at f.now.
func (f *fixture) heartbeat(l backend.Lease, extend time.Duration) backend.LeaseStatus {
	f.t.Helper()
	res, err := f.b.Heartbeat(f.ctx, backend.HeartbeatParams{Leases: []backend.Lease{l}, Extend: extend, Now: f.now})
	if err != nil {
		f.t.Fatalf("Heartbeat: %v", err)
	}
	if len(res.Leases) != 1 {
		f.t.Fatalf("Heartbeat of one lease returned %d statuses; want 1", len(res.Leases))
	}
	return res.Leases[0]
}

// mustOK fails the test when a per-item error is not nil.
func (f *fixture) mustOK(op string, err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatalf("%s at %s: %v; want success", op, stamp(f.now), err)
	}
}

// mustErr fails the test unless err is want.
func (f *fixture) mustErr(op string, err, want error, why string) {
	f.t.Helper()
	if !errors.Is(err, want) {
		f.t.Fatalf("%s at %s = %v; want %v: %s", op, stamp(f.now), err, want, why)
	}
}

// maintenance runs one step at f.now with a limit.
func (f *fixture) maintenance(name string, step func(context.Context, backend.MaintenanceParams) (backend.MaintenanceResult, error), limit int) backend.MaintenanceResult {
	f.t.Helper()
	res, err := step(f.ctx, backend.MaintenanceParams{Now: f.now, Limit: limit})
	if err != nil {
		f.t.Fatalf("%s at %s: %v", name, stamp(f.now), err)
	}
	return res
}

func (f *fixture) promote() backend.MaintenanceResult {
	f.t.Helper()
	return f.maintenance("Promote", f.b.Promote, 0)
}

func (f *fixture) recoverLeases() backend.MaintenanceResult {
	f.t.Helper()
	return f.maintenance("RecoverLeases", f.b.RecoverLeases, 0)
}

func (f *fixture) applyRetention() backend.MaintenanceResult {
	f.t.Helper()
	return f.maintenance("ApplyRetention", f.b.ApplyRetention, 0)
}

// wantResult compares a maintenance result with what the step should have done.
func (f *fixture) wantResult(step string, got, want backend.MaintenanceResult) {
	f.t.Helper()
	if got != want {
		f.t.Fatalf("%s at %s = %+v; want %+v", step, stamp(f.now), got, want)
	}
}

// sameTime compares two times to the millisecond; zero matches only zero.
func sameTime(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero() && b.IsZero()
	}
	return a.Truncate(time.Millisecond).Equal(b.Truncate(time.Millisecond))
}

// wantTime fails the test unless got and want are the same millisecond.
func (f *fixture) wantTime(what string, got, want time.Time) {
	f.t.Helper()
	if !sameTime(got, want) {
		f.t.Fatalf("%s = %s; want %s", what, stamp(got), stamp(want))
	}
}

// stamp shows a time as an offset from t0, which reads better in failures.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "zero"
	}
	return fmt.Sprintf("t0+%s", t.Sub(t0))
}

// normalize makes a comparable copy of j: times truncated to the
// millisecond in UTC, empty slices and maps as nil (backend.NormalizeJobAt).
func normalize(j *backend.Job) *backend.Job { return backend.NormalizeJobAt(j, time.Millisecond) }

func normTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.Truncate(time.Millisecond).UTC()
}

// diffJobs lists the fields in which two jobs differ.
func diffJobs(a, b *backend.Job) []string {
	na, nb := reflect.ValueOf(*normalize(a)), reflect.ValueOf(*normalize(b))
	var diffs []string
	for i := range na.NumField() {
		fa, fb := na.Field(i).Interface(), nb.Field(i).Interface()
		if !reflect.DeepEqual(fa, fb) {
			diffs = append(diffs, fmt.Sprintf("%s: %v -> %v", na.Type().Field(i).Name, short(fa), short(fb)))
		}
	}
	return diffs
}

func short(v any) string {
	s := fmt.Sprintf("%v", v)
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

// unchanged fails the test when the job differs from before.
func (f *fixture) unchanged(before *backend.Job, why string) {
	f.t.Helper()
	after := f.get(before.ID)
	if d := diffJobs(before, after); len(d) > 0 {
		f.t.Fatalf("job %s changed, but %s:\n\t%s", before.ID, why, strings.Join(d, "\n\t"))
	}
}

// unknownID is an id no store holds.
func (f *fixture) unknownID() string {
	f.t.Helper()
	id, err := backend.NewID()
	if err != nil {
		f.t.Fatal(err)
	}
	return id
}
