package redis

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestParsedActiveRecords drives the library's memo of active records'
// parses (parsedActive in lua/common.lua) through its cases: one record
// written for several jobs (identical jobs claimed together), a heartbeat
// that rewrites a remembered record, and records edited by hand after the
// claim, which must be read as they now are, not as remembered.
func TestParsedActiveRecords(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	c := s.client
	var (
		leases  []backend.Lease
		jobsKey string
		rec     string
	)
	record := func(id string) string {
		t.Helper()
		v, err := c.Do(ctx, c.B().Hget().Key(jobsKey).Field(id).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// Identical jobs enqueued together get identical records unless the
	// clock's millisecond turns between their ids (a record holds its
	// creation time as an offset from the time in its id): a few tries
	// get a set with one record.
	for try := 1; ; try++ {
		jobs := make([]backend.NewJob, 4)
		for i := range jobs {
			jobs[i] = backend.NewJob{Type: "t", Queue: "q", Payload: []byte("same")}
		}
		if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: jobs}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 4, Lease: time.Minute, WorkerID: "w", Now: now})
		if err != nil || len(got.Jobs) != 4 {
			t.Fatalf("Claim = %d jobs, %v; want 4", len(got.Jobs), err)
		}
		leases = make([]backend.Lease, 4)
		for i, j := range got.Jobs {
			leases[i] = backend.Lease{JobID: j.ID, Token: j.LeaseToken}
		}
		num, _ := queueNumOf(got.Jobs[0].ID)
		jobsKey = s.keys.queue(num).jobs()
		rec = record(leases[0].JobID)
		same := true
		for _, l := range leases[1:] {
			same = same && record(l.JobID) == rec
		}
		if same {
			break
		}
		if try == 10 {
			t.Fatal("identical jobs claimed together got different records in 10 tries; the test no longer covers one record written for several jobs")
		}
	}
	set := func(id, v string) {
		t.Helper()
		if err := c.Do(ctx, c.B().Hset().Key(jobsKey).FieldValue().FieldValue(id, v).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}

	// Job 1's record is edited into a valid one under another token, and
	// job 2's into nonsense: neither lease is live any more.
	head, tail, _ := strings.Cut(rec, "\n")
	fields := strings.Split(head, "|")
	fields[hToken-1] += "7"
	set(leases[1].JobID, strings.Join(fields, "|")+"\n"+tail)
	set(leases[2].JobID, "nonsense")

	hb, err := s.Heartbeat(ctx, backend.HeartbeatParams{Leases: leases[:1], Extend: 2 * time.Minute, Now: now.Add(time.Second)})
	if err != nil || hb.Leases[0].Lost {
		t.Fatalf("Heartbeat of a live lease = %+v, %v", hb, err)
	}
	done, err := s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{
		{Lease: leases[0]}, {Lease: leases[1]}, {Lease: leases[2]}, {Lease: leases[3]},
	}, Now: now.Add(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	want := []error{nil, backend.ErrLeaseLost, backend.ErrLeaseLost, nil}
	for i, e := range done.Errors {
		if !errors.Is(e, want[i]) || (want[i] == nil && e != nil) {
			t.Errorf("Complete of job %d = %v, want %v", i, e, want[i])
		}
	}
	for _, i := range []int{0, 3} {
		j, err := s.Get(ctx, backend.GetParams{ID: leases[i].JobID})
		if err != nil || j.State != backend.StateCompleted {
			t.Errorf("job %d after Complete: %v, %v; want completed", i, j, err)
		}
	}
	j, err := s.Get(ctx, backend.GetParams{ID: leases[1].JobID})
	if err != nil || j.State != backend.StateActive || j.LeaseToken != leases[1].Token*10+7 {
		t.Errorf("job edited to another token after Complete: %+v, %v; want active under token %d", j, err, leases[1].Token*10+7)
	}
}

// TestParsedActiveSharedFields claims jobs of one pending header with
// records of their own (payloads differ), so the claim's short way
// remembers all but the first with one table of fields (fastFields in
// lua/claim.lua). A failure and a heartbeat of two of those change what
// load hands them; the others must then still complete from the fields
// as claimed, and the two be recorded as asked.
func TestParsedActiveSharedFields(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	got := claimOwnPayloads(t, s, now, 5)
	leases := make([]backend.Lease, 5)
	for i, j := range got.Jobs {
		leases[i] = backend.Lease{JobID: j.ID, Token: j.LeaseToken}
	}
	retryAt := now.Add(time.Hour)
	fb, err := s.Fail(ctx, backend.FailParams{Now: now.Add(time.Second), Items: []backend.FailItem{{Lease: leases[1], Message: "boom", RetryAt: retryAt}}})
	if err != nil || fb.Errors[0] != nil {
		t.Fatalf("Fail = %+v, %v", fb, err)
	}
	hb, err := s.Heartbeat(ctx, backend.HeartbeatParams{Leases: leases[2:3], Extend: 2 * time.Minute, Now: now.Add(time.Second)})
	if err != nil || hb.Leases[0].Lost {
		t.Fatalf("Heartbeat = %+v, %v", hb, err)
	}
	rest := []int{0, 2, 3, 4}
	items := make([]backend.CompleteItem, len(rest))
	for k, i := range rest {
		items[k] = backend.CompleteItem{Lease: leases[i]}
	}
	end := now.Add(2 * time.Second)
	done, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: end})
	if err != nil {
		t.Fatal(err)
	}
	for k, e := range done.Errors {
		if e != nil {
			t.Errorf("Complete of job %d = %v, want done", rest[k], e)
		}
	}
	j, err := s.Get(ctx, backend.GetParams{ID: leases[1].JobID})
	if err != nil || j.State != backend.StateRetry || !j.RunAt.Equal(retryAt) || j.Attempt != 1 {
		t.Errorf("failed job: %+v, %v; want retry at %v after attempt 1", j, err, retryAt)
	}
	for _, i := range rest {
		j, err := s.Get(ctx, backend.GetParams{ID: leases[i].JobID})
		if err != nil {
			t.Fatal(err)
		}
		if j.State != backend.StateCompleted || j.Attempt != 1 || j.MaxAttempts != 25 || !j.StartedAt.Equal(now) || !j.FinishedAt.Equal(end) || string(j.Payload) != string(ownPayload(i)) {
			t.Errorf("job %d: %s, attempt %d of %d, started %v, finished %v, payload %q; want completed, 1 of 25, %v, %v, %q",
				i, j.State, j.Attempt, j.MaxAttempts, j.StartedAt, j.FinishedAt, j.Payload, now, end, ownPayload(i))
		}
	}
}

// TestParsedActiveLeaseExpiry completes jobs remembered by the claim's
// short way (their parsedActive entries hold the lease expiry as a
// number) once at the expiry, refused, and once just before it.
func TestParsedActiveLeaseExpiry(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	got := claimOwnPayloads(t, s, now, 3)
	exp := now.Add(time.Minute)
	for _, c := range []struct {
		job  int
		at   time.Time
		want error
	}{{2, exp, backend.ErrLeaseLost}, {1, exp.Add(-time.Millisecond), nil}} {
		j := got.Jobs[c.job]
		res, err := s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: j.ID, Token: j.LeaseToken}}}, Now: c.at})
		if err != nil {
			t.Fatal(err)
		}
		if e := res.Errors[0]; !errors.Is(e, c.want) || (c.want == nil && e != nil) {
			t.Errorf("Complete of job %d at %v = %v, want %v", c.job, c.at, e, c.want)
		}
	}
}

// claimOwnPayloads enqueues n jobs of queue "q" that share a pending
// header but not a payload, and claims them all for a minute at now.
func claimOwnPayloads(t *testing.T, s *Store, now time.Time, n int) backend.ClaimResult {
	t.Helper()
	ctx := t.Context()
	jobs := make([]backend.NewJob, n)
	for i := range jobs {
		jobs[i] = backend.NewJob{Type: "t", Queue: "q", Payload: ownPayload(i)}
	}
	if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: n, Lease: time.Minute, WorkerID: "w", Now: now})
	if err != nil || len(got.Jobs) != n {
		t.Fatalf("Claim = %d jobs, %v; want %d", len(got.Jobs), err, n)
	}
	return got
}

// ownPayload is the payload of the i-th job of claimOwnPayloads.
func ownPayload(i int) []byte { return []byte{'p', byte('0' + i)} }
