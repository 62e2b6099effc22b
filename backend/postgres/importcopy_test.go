package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kyuhq/kyu/backend"
)

// TestImportByCopy: a batch of jobs with no unique key and no log lines,
// written by COPY, reads back field by field as imported, at microsecond
// precision; a second import of it, and a batch that mixes its jobs with
// new ones, go the general way and report the old jobs the same.
func TestImportByCopy(t *testing.T) {
	s := openTestStore(t, Options{})
	ctx := t.Context()
	now := time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)
	created := now.Add(-time.Hour).Add(123456789 * time.Nanosecond)
	var jobs []*backend.Job
	states := []backend.State{backend.StatePending, backend.StateScheduled, backend.StateRetry, backend.StateCompleted, backend.StateFailed, backend.StateCancelled}
	for i := range 3 * copyMinJobs {
		st := states[i%len(states)]
		j := &backend.Job{ID: uuid.Must(uuid.NewV7()).String(), Type: "t", Queue: "copied", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)),
			Title: fmt.Sprint("job ", i), Priority: i % 5, State: st, MaxAttempts: 5, RunAt: created, Timeout: time.Minute,
			Deadline: created.Add(time.Duration(i+1) * time.Hour), UniqueKey: fmt.Sprint("k", i), UniqueFor: time.Second,
			Tags: []string{"a"}, Metadata: map[string]string{"i": fmt.Sprint(i)}, Retention: backend.RetainForever, CreatedAt: created}
		switch st {
		case backend.StateScheduled:
			j.RunAt, j.UniqueKey, j.UniqueFor = now.Add(time.Hour), "", 0
		case backend.StateRetry:
			j.RunAt, j.Attempt, j.LeaseToken, j.StartedAt, j.WorkerID, j.UniqueKey, j.UniqueFor = now.Add(time.Minute), 1, 1, created.Add(time.Minute), "w1", "", 0
			j.Errors = []backend.AttemptError{{Attempt: 1, At: created.Add(2 * time.Minute), Kind: backend.AttemptFailed, Message: "boom", Stack: "at x"}}
			j.Progress = &backend.Progress{Percent: 40, Message: "half", At: created.Add(90 * time.Second)}
			j.LogsDropped = 3
		case backend.StateCompleted, backend.StateFailed, backend.StateCancelled:
			j.Attempt, j.LeaseToken, j.StartedAt, j.FinishedAt = 1, 1, created.Add(time.Minute), created.Add(2*time.Minute)
			j.Retention, j.ExpiresAt = backend.RetainFor(time.Hour), j.FinishedAt.Add(time.Hour)
			j.Deadline = time.Time{}
			if st == backend.StateCompleted {
				j.Result = []byte(`{"ok":true}`)
			}
			if st == backend.StateCancelled {
				j.CancelReason, j.CancelRequested = backend.CancelReasonRequested, true
			}
		}
		jobs = append(jobs, j)
	}
	first := jobs[:2*copyMinJobs]
	if items := make([]backend.ImportItem, len(first)); true {
		ok, _, err := s.importByCopy(ctx, backend.ImportParams{Jobs: first, Now: now}, items)
		if err != nil || !ok {
			t.Fatalf("importByCopy: %v, %v; want the batch written by COPY", ok, err)
		}
	}
	for _, j := range first {
		got, err := s.Get(ctx, backend.GetParams{ID: j.ID})
		if err != nil {
			t.Fatal(err)
		}
		if f := backend.SameJob(j, got); f != "" {
			t.Fatalf("%s job %s: %s differs:\n%+v\n%+v", j.State, j.ID, f, j, got)
		}
	}
	res, err := s.Import(ctx, backend.ImportParams{Jobs: jobs, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range res.Items {
		want := backend.ImportSame
		if i >= len(first) {
			want = backend.ImportCreated
		}
		if it.Outcome != want {
			t.Fatalf("job %d of the second import: %+v; want %v", i, it, want)
		}
	}
}

// TestImportByCopyLeavesJIDs: a batch large enough for COPY in which a
// job has a JID is written the general way, so the JID is indexed and
// checked against its holders.
func TestImportByCopyLeavesJIDs(t *testing.T) {
	s := openTestStore(t, Options{})
	ctx := t.Context()
	now := time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)
	var jobs []*backend.Job
	for i := range copyMinJobs {
		jobs = append(jobs, &backend.Job{ID: uuid.Must(uuid.NewV7()).String(), Type: "t", Queue: "copied", Payload: []byte(`{}`),
			State: backend.StatePending, MaxAttempts: 5, RunAt: now, Timeout: time.Minute, Retention: backend.RetainForever,
			CreatedAt: now, JID: fmt.Sprint("jid-", i)})
	}
	items := make([]backend.ImportItem, len(jobs))
	if ok, _, err := s.importByCopy(ctx, backend.ImportParams{Jobs: jobs, Now: now}, items); ok || err != nil {
		t.Fatalf("importByCopy of jobs with JIDs: %v, %v; want them left to the general path", ok, err)
	}
	if _, err := s.Import(ctx, backend.ImportParams{Jobs: jobs, Now: now}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, backend.GetParams{JID: "jid-7"})
	if err != nil || got.ID != jobs[7].ID {
		t.Fatalf("Get by the JID of an imported job: %v, %v; want %s", got, err, jobs[7].ID)
	}
}
