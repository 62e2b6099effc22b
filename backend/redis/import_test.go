package redis

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kyuhq/kyu/backend"
)

// TestImportIDOfAnotherQueue imports a job whose id carries the number of
// another queue of the store (as a job from another store may): every
// call naming it still finds it, at its home.
func TestImportIDOfAnotherQueue(t *testing.T) {
	s := openTest(t, "")
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "x", Queue: "a"}}, Now: now}); err != nil {
		t.Fatal(err)
	}
	numA, _, err := s.queues.number(ctx, "a", false)
	if err != nil {
		t.Fatal(err)
	}
	u := uuid.Must(uuid.NewV7())
	u[9], u[10], u[11] = byte(numA>>16), byte(numA>>8), byte(numA)
	j := &backend.Job{ID: u.String(), Type: "x", Queue: "b", State: backend.StatePending, MaxAttempts: 3,
		RunAt: now, Timeout: time.Minute, CreatedAt: now, Payload: []byte(`{}`)}
	res, err := s.Import(ctx, backend.ImportParams{Jobs: []*backend.Job{j}, Now: now})
	if err != nil || res.Items[0].Outcome != backend.ImportCreated {
		t.Fatalf("Import: %+v, %v", res, err)
	}
	res, err = s.Import(ctx, backend.ImportParams{Jobs: []*backend.Job{j}, Now: now})
	if err != nil || res.Items[0].Outcome != backend.ImportSame {
		t.Fatalf("second Import: %+v, %v; want same", res, err)
	}
	if got, err := s.Get(ctx, backend.GetParams{ID: j.ID}); err != nil || got.Queue != "b" {
		t.Fatalf("Get: %v, %v; want the job in queue b", got, err)
	}
	c, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"b"}, Max: 1, Lease: time.Minute, WorkerID: "w", Now: now})
	if err != nil || len(c.Jobs) != 1 {
		t.Fatalf("Claim: %v, %v", c, err)
	}
	br, err := s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: j.ID, Token: c.Jobs[0].LeaseToken}}}, Now: now})
	if err != nil || br.Errors[0] != nil {
		t.Fatalf("Complete: %v, %v", br, err)
	}
	page, err := s.List(ctx, backend.ListParams{Queue: "b", State: backend.StateCompleted})
	if err != nil || len(page.Jobs) != 1 {
		t.Fatalf("List: %v, %v; want the completed job", page, err)
	}
	if err := s.Delete(ctx, backend.DeleteParams{ID: j.ID, Now: now}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
}

// TestImportHomeWithoutJob: a job's home recorded with no job behind it
// (an import killed between the two, or a job deleted since: its home
// stays) does not stop a rerun from writing the job.
func TestImportHomeWithoutJob(t *testing.T) {
	s := openTest(t, "")
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	job := func() *backend.Job {
		u := uuid.Must(uuid.NewV7())
		u[9], u[10], u[11] = 0xfe, 0xfe, 0xfe // no queue's number
		return &backend.Job{ID: u.String(), Type: "x", Queue: "b", State: backend.StatePending, MaxAttempts: 3,
			RunAt: now, Timeout: time.Minute, CreatedAt: now, Payload: []byte(`{}`)}
	}
	if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "x", Queue: "b"}}, Now: now}); err != nil {
		t.Fatal(err)
	}
	numB, _, err := s.queues.number(ctx, "b", false)
	if err != nil {
		t.Fatal(err)
	}
	crashed := job()
	if err := s.client.Do(ctx, s.client.B().Hset().Key(s.keys.homes()).FieldValue().FieldValue(crashed.ID, strconv.FormatUint(uint64(numB), 10)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	deleted := job()
	if res, err := s.Import(ctx, backend.ImportParams{Jobs: []*backend.Job{deleted}, Now: now}); err != nil || res.Items[0].Outcome != backend.ImportCreated {
		t.Fatalf("Import: %+v, %v", res, err)
	}
	if err := s.Delete(ctx, backend.DeleteParams{ID: deleted.ID, Now: now}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Import(ctx, backend.ImportParams{Jobs: []*backend.Job{crashed, deleted}, Now: now})
	if err != nil {
		t.Fatalf("Import over homes without jobs: %v", err)
	}
	for i, j := range []*backend.Job{crashed, deleted} {
		if res.Items[i].Outcome != backend.ImportCreated {
			t.Fatalf("job %d: %+v; want created", i, res.Items[i])
		}
		if got, err := s.Get(ctx, backend.GetParams{ID: j.ID}); err != nil || got.Queue != "b" {
			t.Fatalf("Get(%s): %v, %v; want the job in queue b", j.ID, got, err)
		}
	}
	if res, err := s.Import(ctx, backend.ImportParams{Jobs: []*backend.Job{crashed, deleted}, Now: now}); err != nil ||
		res.Items[0].Outcome != backend.ImportSame || res.Items[1].Outcome != backend.ImportSame {
		t.Fatalf("third Import: %+v, %v; want both the same", res, err)
	}
}
