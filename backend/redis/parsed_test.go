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
