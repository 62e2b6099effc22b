package redis

import (
	"reflect"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

func TestRecordRoundTrip(t *testing.T) {
	t.Parallel()
	id, err := newJobID(7)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 2, 3, 4, 5, 6e6, time.UTC)
	jobs := []*backend.Job{
		{Type: "a", State: backend.StatePending, MaxAttempts: 25, RunAt: now, Timeout: 30 * time.Minute, CreatedAt: now, Retention: backend.RetainDefault},
		{
			Type: "b|\n", Payload: []byte{0, '|', '\n', 255}, Title: "t", Priority: -100, State: backend.StateActive, Attempt: 3, MaxAttempts: 4,
			RunAt: now.Add(time.Hour), Timeout: 1500 * time.Microsecond, Deadline: now.Add(2 * time.Hour), UniqueKey: "k|\n", UniqueFor: time.Second + 1,
			Tags: []string{"x", ""}, Metadata: map[string]string{"a": "1", "b": ""}, Retention: backend.RetainNone, CreatedAt: now.Add(-time.Minute),
			StartedAt: now, WorkerID: "w|\n", LeaseToken: 9, LeaseExpiresAt: now.Add(time.Minute),
		},
		{Type: "c", State: backend.StateCompleted, MaxAttempts: 1, RunAt: now, Retention: backend.RetainForever, CreatedAt: now, FinishedAt: now},
		{Type: "d", State: backend.StateFailed, MaxAttempts: 1, RunAt: now, Retention: backend.RetainFor(36 * time.Hour), CreatedAt: now},
	}
	for i, j := range jobs {
		j.ID, j.Queue = id, "q"
		got, err := decodeRecord(id, "q", encodeRecord(j))
		if err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, j) {
			t.Errorf("job %d round trip:\n got  %+v\n want %+v", i, got, j)
		}
	}
}

// FuzzDecodeRecord: whatever a hand-edited record holds, decoding reports
// an error or a job, never a panic.
func FuzzDecodeRecord(f *testing.F) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	id, _ := newJobID(1)
	f.Add(encodeRecord(&backend.Job{ID: id, Type: "t", State: backend.StatePending, MaxAttempts: 1, RunAt: now, CreatedAt: now, UniqueKey: "u", Tags: []string{"a"}}))
	f.Add("p|0|1|0|0|1|||||||5|\nabc")
	f.Fuzz(func(t *testing.T, rec string) {
		decodeRecord(id, "q", rec)
	})
}
