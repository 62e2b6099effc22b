package redis

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestClaimSharedHeaders claims jobs whose records share their header
// (enqueued together, alike but for payload, type and unique key), the
// case load's lastHeader serves, with records edited by hand among
// them: one into another valid header, one into a header that does not
// parse. Each job is read from its own record: its body and unique key,
// and the header as it now is. In a store of format 2 the shared header
// is a long one, in a new store the short one (record.go), which the
// edits write out long; jobs of the default max attempts have none
// there (bare records, which the claim takes its short way too).
func TestClaimSharedHeaders(t *testing.T) {
	t.Parallel()
	eachFormat(t, func(t *testing.T, s *Store, format int) {
		for _, max := range []int{3, 0} {
			testClaimSharedHeaders(t, s, format, max)
		}
	})
}

func testClaimSharedHeaders(t *testing.T, s *Store, format, maxAttempts int) {
	ctx := t.Context()
	c := s.client
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	queue := "q" + strconv.Itoa(maxAttempts)
	var jobs []backend.NewJob
	for i := range 8 {
		j := backend.NewJob{Type: fmt.Sprintf("t%d", i%2), Queue: queue, Payload: []byte(fmt.Sprintf("payload %d", i)), MaxAttempts: maxAttempts}
		if i >= 5 {
			j.UniqueKey = fmt.Sprintf("k%d", i) // same length: the header is shared
		}
		jobs = append(jobs, j)
	}
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(res.Jobs))
	for i, j := range res.Jobs {
		ids[i] = j.ID
	}
	num, _ := queueNumOf(ids[0])
	jobsKey := s.keys.queue(num).jobs()
	get := func(id string) string {
		t.Helper()
		v, err := c.Do(ctx, c.B().Hget().Key(jobsKey).Field(id).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	set := func(id, v string) {
		t.Helper()
		if err := c.Do(ctx, c.B().Hset().Key(jobsKey).FieldValue().FieldValue(id, v).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	rec1 := get(ids[1])
	head1, _ := recordHead(rec1)
	if bare := isBare(rec1); bare != (format >= 3 && maxAttempts == 0) {
		t.Fatalf("format %d store wrote the record %q of a job of max attempts %d", format, rec1, maxAttempts)
	}
	if short := isShortHeader(head1); short != (format >= 3) {
		t.Fatalf("format %d store wrote the header %q", format, head1)
	}
	for _, id := range ids[2:5] {
		if h, _ := recordHead(get(id)); h != head1 {
			t.Fatalf("header of %s = %q, want %q as job 1's: the test no longer covers shared headers", id, h, head1)
		}
	}
	// Job 3 gets 7 attempts at most; job 4 a header that does not parse.
	fields, tail3 := headerFieldsOf(t, get(ids[3]))
	fields[hMaxAttempts-1] = "7"
	set(ids[3], strings.Join(fields, "|")+"\n"+tail3)
	fields, tail4 := headerFieldsOf(t, get(ids[4]))
	fields[hMaxAttempts-1] = "25"
	fields[hAttempt-1] = "x"
	set(ids[4], strings.Join(fields, "|")+"\n"+tail4)

	// Twice: through the claim's plain path and its type filter.
	claimed := 0
	for _, types := range [][]string{nil, {"t0", "t1"}} {
		got, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{queue}, Types: types, Max: 4, Lease: time.Minute, WorkerID: "w", Now: now})
		if err != nil {
			t.Fatal(err)
		}
		claimed += len(got.Jobs)
		for _, j := range got.Jobs {
			i := -1
			for k, id := range ids {
				if id == j.ID {
					i = k
				}
			}
			if i < 0 || i == 4 {
				t.Fatalf("claimed %s, which is not one of %v less the corrupt one", j.ID, ids)
			}
			want := jobs[i]
			maxAttempts := want.MaxAttempts
			if maxAttempts == 0 {
				maxAttempts = backend.DefaultMaxAttempts
			}
			if i == 3 {
				maxAttempts = 7
			}
			if j.Type != want.Type || string(j.Payload) != string(want.Payload) || j.UniqueKey != want.UniqueKey || j.MaxAttempts != maxAttempts || j.Attempt != 1 || j.LeaseToken != 1 || j.State != backend.StateActive {
				t.Errorf("job %d claimed as type %q, payload %q, unique key %q, max attempts %d, attempt %d, token %d, %s; want %q, %q, %q, %d, 1, 1, active",
					i, j.Type, j.Payload, j.UniqueKey, j.MaxAttempts, j.Attempt, j.LeaseToken, j.State, want.Type, want.Payload, want.UniqueKey, maxAttempts)
			}
		}
	}
	if claimed != 7 {
		t.Errorf("claimed %d jobs, want the 7 whose records parse", claimed)
	}
}

// TestCompleteSharedHeaders completes in one call jobs claimed together,
// whose claimed records share their header, one of them edited by hand
// after the claim into another valid header under the same lease: each
// completed record is made from its own header.
func TestCompleteSharedHeaders(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	c := s.client
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	jobs := make([]backend.NewJob, 4)
	for i := range jobs {
		jobs[i] = backend.NewJob{Type: "t", Queue: "q", Payload: []byte(fmt.Sprintf("payload %d", i))}
	}
	if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 4, Lease: time.Minute, WorkerID: "w", Now: now})
	if err != nil || len(got.Jobs) != 4 {
		t.Fatalf("Claim = %d jobs, %v; want 4", len(got.Jobs), err)
	}
	num, _ := queueNumOf(got.Jobs[0].ID)
	jobsKey := s.keys.queue(num).jobs()
	rec, err := c.Do(ctx, c.B().Hget().Key(jobsKey).Field(got.Jobs[2].ID).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	head, tail, _ := strings.Cut(rec, "\n")
	fields := strings.Split(head, "|")
	fields[hMaxAttempts-1] = "7"
	if err := c.Do(ctx, c.B().Hset().Key(jobsKey).FieldValue().FieldValue(got.Jobs[2].ID, strings.Join(fields, "|")+"\n"+tail).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	items := completeItems(got.Jobs)
	end := now.Add(time.Second)
	res, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: end})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range res.Errors {
		if e != nil {
			t.Fatalf("complete %d: %v", i, e)
		}
	}
	for i, cl := range got.Jobs {
		j, err := s.Get(ctx, backend.GetParams{ID: cl.ID})
		if err != nil {
			t.Fatal(err)
		}
		maxAttempts := 25
		if i == 2 {
			maxAttempts = 7
		}
		if j.State != backend.StateCompleted || j.MaxAttempts != maxAttempts || !j.FinishedAt.Equal(end) || !j.StartedAt.Equal(now) || string(j.Payload) != string(cl.Payload) {
			t.Errorf("job %d: %s, max attempts %d, finished %v, started %v, payload %q; want completed, %d, %v, %v, %q",
				i, j.State, j.MaxAttempts, j.FinishedAt, j.StartedAt, j.Payload, maxAttempts, end, now, cl.Payload)
		}
	}
}

// TestClaimShortWayAfterBare: the claim's short way, once a bare record
// set it to match bare records by a pattern, matches the next shared
// header it takes as text again, not as a pattern: the header of a
// priority below 0 holds a "-", which a pattern reads as a repetition,
// so "p|0|25|0|-5|..." would match a record of priority 5 (edited here by
// hand into the last of the jobs), and claim it under the priority -5
// header, and miss the records of that header itself.
func TestClaimShortWayAfterBare(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	c := s.client
	now := time.Now().Add(-time.Second).Truncate(time.Millisecond).UTC()
	jobs := []backend.NewJob{{Type: "bare", Queue: "q"}, {Type: "bare", Queue: "q"}}
	for range 3 {
		jobs = append(jobs, backend.NewJob{Type: "neg", Queue: "q", Priority: -5})
	}
	ids := enqueueIDs(t, s, now, jobs...)
	recs := storedRecords(t, s, ids...)
	if !isBare(recs[ids[0]]) || !isBare(recs[ids[1]]) {
		t.Fatalf("records %q, %q; want bare ones", recs[ids[0]], recs[ids[1]])
	}
	head, tail := recordHead(recs[ids[4]])
	if h2, _ := recordHead(recs[ids[3]]); h2 != head || !strings.Contains(head, "|-5|") {
		t.Fatalf("headers %q and %q, want one shared header of priority -5", h2, head)
	}
	num, _ := queueNumOf(ids[0])
	edited := strings.Replace(head, "|-5|", "|5|", 1) + "\n" + tail
	if err := c.Do(ctx, c.B().Hset().Key(s.keys.queue(num).jobs()).FieldValue().FieldValue(ids[4], edited).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute, WorkerID: "w", Now: now.Add(time.Second)})
	if err != nil || len(got.Jobs) != len(ids) {
		t.Fatalf("Claim = %d jobs, %v; want %d; stored %q", len(got.Jobs), err, len(ids), storedRecords(t, s, ids[3:]...))
	}
	for _, j := range got.Jobs {
		k := slices.Index(ids, j.ID)
		want := jobs[k].Priority
		if k == 4 {
			want = 5
		}
		if j.Priority != want || j.Type != jobs[k].Type || j.State != backend.StateActive {
			t.Errorf("claimed job %d: %+v; want type %s, priority %d, active", k, j, jobs[k].Type, want)
		}
	}
}
