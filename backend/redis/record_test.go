package redis

import (
	"reflect"
	"strings"
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
		{Type: "e", State: backend.StatePending, MaxAttempts: 1, RunAt: now, CreatedAt: now, UniqueKey: "u", JID: "j|\n\x00" + string(make([]byte, backend.MaxJID-4)),
			Tags: []string{"t"}, Metadata: map[string]string{"m": "v"}},
		{Type: "f", State: backend.StatePending, MaxAttempts: 1, RunAt: now, CreatedAt: now, JID: "x"},
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

// TestRecordBodyVersion: a job without a JID is stored as before JIDs
// (body version 1), one with a JID in body version 2, which ends with the
// JID and its length (what jobJID in lua/common.lua reads).
func TestRecordBodyVersion(t *testing.T) {
	t.Parallel()
	id, _ := newJobID(1)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	j := &backend.Job{ID: id, Type: "t", State: backend.StatePending, MaxAttempts: 1, RunAt: now, CreatedAt: now, UniqueKey: "uk"}
	body := func(rec string) string {
		_, rest, _ := strings.Cut(rec, "\n")
		return rest[len(j.UniqueKey):]
	}
	if b := body(encodeRecord(j)); b[0] != bodyVersion {
		t.Fatalf("body of a job without a jid starts with %d; want %d", b[0], bodyVersion)
	}
	j.JID = "abc"
	b := body(encodeRecord(j))
	if b[0] != bodyVersionJID || !strings.HasSuffix(b, "abc\x00\x03") {
		t.Fatalf("body of a job with jid abc = %q; want version %d, ending in the jid and its length", b, bodyVersionJID)
	}
}

// FuzzDecodeRecord: whatever a hand-edited record holds, decoding reports
// an error or a job, never a panic.
func FuzzDecodeRecord(f *testing.F) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	id, _ := newJobID(1)
	f.Add(encodeRecord(&backend.Job{ID: id, Type: "t", State: backend.StatePending, MaxAttempts: 1, RunAt: now, CreatedAt: now, UniqueKey: "u", Tags: []string{"a"}}))
	f.Add("p|0|1|0|0|1|||||||5|\nabc")
	f.Add(string(appendRecord(nil, &backend.Job{ID: id, Type: "t", State: backend.StatePending, MaxAttempts: 25, RunAt: now, CreatedAt: now, JID: "j"}, true)))
	f.Add("p7\n\x01")
	f.Fuzz(func(t *testing.T, rec string) {
		decodeRecord(id, "q", rec)
	})
}

// TestNewRecord: the record enqueue encodes is NewJob.Record's, without
// its copies.
func TestNewRecord(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 6e6, time.UTC)
	for i, nj := range []backend.NewJob{
		{Type: "a", Queue: "q", MaxAttempts: 3},
		{Type: "b", Queue: "q", Payload: []byte("x"), Title: "t", Priority: 5, RunAt: now.Add(time.Hour), MaxAttempts: 1, Timeout: time.Second,
			Deadline: now.Add(2 * time.Hour), UniqueKey: "u", UniqueFor: time.Minute, Tags: []string{"x"}, Metadata: map[string]string{"k": "v"}, Retention: backend.RetainNone},
		{Type: "c", Queue: "q", RunAt: now.Add(-time.Hour)},
		{Type: "d", Queue: "q", RunAt: now},
	} {
		got, want := newRecord(&nj, "id", now), nj.Record("id", now)
		if !reflect.DeepEqual(&got, want) {
			t.Errorf("job %d:\n got  %+v\n want %+v", i, got, *want)
		}
	}
}

// benchRecordJob is a job as BenchmarkRedisCPU enqueues it, as claimed.
func benchRecordJob() *backend.Job {
	now := time.Date(2030, 1, 2, 3, 4, 5, 6e6, time.UTC)
	id, _ := newJobID(7)
	return &backend.Job{ID: id, Queue: "bench", Type: "bench", Payload: make([]byte, 100), State: backend.StateActive, Attempt: 1, MaxAttempts: 25,
		RunAt: now, Timeout: 30 * time.Minute, CreatedAt: now, LeaseToken: 123456789, LeaseExpiresAt: now.Add(time.Minute), StartedAt: now, WorkerID: "host-1234-abcd"}
}

func BenchmarkEncodeRecord(b *testing.B) {
	j := benchRecordJob()
	b.ReportAllocs()
	for b.Loop() {
		encodeRecord(j)
	}
}

func BenchmarkDecodeRecord(b *testing.B) {
	j := benchRecordJob()
	rec := encodeRecord(j)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeRecord(j.ID, j.Queue, rec); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAppendID: job ids read as uuid writes them.
func TestAppendID(t *testing.T) {
	t.Parallel()
	for range 100 {
		u, err := newJobUUID(0xabcdef)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(appendID(nil, u)), u.String(); got != want {
			t.Fatalf("appendID = %s, want %s", got, want)
		}
	}
}

// TestRecordShare: records decoded together share the worker id string
// and one allocation for their payloads, yet each payload is the job's
// own: growing one leaves the next as it was. A record of another worker
// decodes its own id; records without a payload take no room.
func TestRecordShare(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var recs []string
	var ids []string
	for i, w := range []string{"w1", "w1", "other", "w1"} {
		id, err := newJobID(1)
		if err != nil {
			t.Fatal(err)
		}
		j := &backend.Job{ID: id, Queue: "q", Type: "t", State: backend.StateActive, MaxAttempts: 3, Attempt: 1, LeaseToken: 1,
			RunAt: now, CreatedAt: now, StartedAt: now, LeaseExpiresAt: now.Add(time.Minute), WorkerID: w,
			Payload: []byte(strings.Repeat(string(rune('a'+i)), 10))}
		if i == 3 {
			j.Payload = nil
		}
		ids, recs = append(ids, id), append(recs, encodeRecord(j))
	}
	room := 0
	for _, r := range recs {
		room += len(r)
	}
	workerHex := "7731" // hex of "w1", as Claim passes it
	sh := &recordShare{workerHex: workerHex, workerID: "w1", rest: room}
	got := make([]backend.Job, len(recs))
	for i, r := range recs {
		if err := decodeRecordTo(&got[i], ids[i], "q", r, sh); err != nil {
			t.Fatal(err)
		}
		sh.rest -= len(r)
	}
	if cap(sh.payloads) != room {
		t.Errorf("payload room %d bytes, want the records' %d", cap(sh.payloads), room)
	}
	for i, want := range []string{"w1", "w1", "other", "w1"} {
		if got[i].WorkerID != want {
			t.Errorf("job %d: worker %q, want %q", i, got[i].WorkerID, want)
		}
	}
	if got[3].Payload != nil {
		t.Errorf("job 3: payload %q, want none", got[3].Payload)
	}
	none := &recordShare{rest: len(recs[3])}
	if err := decodeRecordTo(&got[3], ids[3], "q", recs[3], none); err != nil {
		t.Fatal(err)
	}
	if none.payloads != nil {
		t.Errorf("a record without a payload took %d bytes of room", cap(none.payloads))
	}
	got[0].Payload = append(got[0].Payload, "zzzzzzzzzz"...)
	got[0].Payload[0] = 'Z'
	for i, want := range []string{"Zaaaaaaaaazzzzzzzzzz", "bbbbbbbbbb", "cccccccccc"} {
		if string(got[i].Payload) != want {
			t.Errorf("job %d: payload %q, want %q", i, got[i].Payload, want)
		}
	}
}
