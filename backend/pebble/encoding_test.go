package pebble

import (
	"encoding/binary"
	"reflect"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

func fullJob() *backend.Job {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	return &backend.Job{
		Type: "mail", Queue: "q", Title: "hello", Priority: -7, State: backend.StateFailed,
		Attempt: 3, MaxAttempts: 5, RunAt: at, Timeout: time.Minute, Deadline: at.Add(time.Hour),
		UniqueKey: "k", UniqueFor: time.Hour, Tags: []string{"a", ""}, Metadata: map[string]string{"x": "1", "y": ""},
		Retention: backend.RetainForever, CreatedAt: at.Add(-time.Hour), StartedAt: time.Unix(0, 0).UTC(),
		FinishedAt: at.Add(time.Second), WorkerID: "w1", LeaseToken: 9, LeaseExpiresAt: at.Add(-time.Second),
		Errors: []backend.AttemptError{
			{Attempt: 1, At: at, Kind: backend.AttemptFailed, Message: "boom", Stack: "stack"},
			{Attempt: 2, At: at.Add(time.Minute), Kind: backend.AttemptLeaseExpired},
		},
		Result: []byte{}, CancelReason: "x",
	}
}

func TestEncodingRoundTrip(t *testing.T) {
	for name, j := range map[string]*backend.Job{
		"full":    fullJob(),
		"minimal": {Type: "t", Queue: "default", State: backend.StatePending},
		"empties": {Type: "t", Queue: "q", State: backend.StateActive, Tags: []string{}, Metadata: map[string]string{}, Result: []byte("r")},
	} {
		for _, sd := range []side{{}, {payload: true}, {logs: 3}, {payload: true, logs: 1000}} {
			b := encodeJob(nil, j, sd)
			got, hp, err := decodeJob(b)
			if err != nil {
				t.Fatalf("%s: decode: %v", name, err)
			}
			if hp != sd {
				t.Errorf("%s: side = %+v; want %+v", name, hp, sd)
			}
			if !reflect.DeepEqual(got, j) {
				t.Errorf("%s: round trip\n got %+v\nwant %+v", name, got, j)
			}
		}
	}
}

func TestDecodeRefusesDamage(t *testing.T) {
	b := encodeJob(nil, fullJob(), side{payload: true, logs: 2})
	for i := 0; i < len(b); i++ {
		if _, _, err := decodeJob(b[:i]); err == nil {
			t.Fatalf("a record truncated to %d of %d bytes decoded without error", i, len(b))
		}
	}
	if _, _, err := decodeJob(append(append([]byte{}, b...), 0)); err == nil {
		t.Fatal("a record with a trailing byte decoded without error")
	}
	bad := append([]byte{}, b...)
	for _, v := range []byte{0, recordVersion + 1} {
		bad[0] = v
		if _, _, err := decodeJob(bad); err == nil {
			t.Fatalf("a record of the unknown version %d decoded without error", v)
		}
	}
}

func FuzzDecodeJob(f *testing.F) {
	f.Add(encodeJob(nil, fullJob(), side{payload: true, logs: 2}))
	f.Add(encodeJob(nil, &backend.Job{Type: "t", Queue: "q", State: backend.StatePending}, side{}))
	f.Add(encodeJob(nil, withNewFields(fullJob()), side{payload: true, logs: 1000}))
	f.Add(encodeJobV1(fullJob(), side{payload: true}))
	f.Add(encodeJobV1(&backend.Job{Type: "t", Queue: "q", State: backend.StateCompleted, FinishedAt: time.Unix(5, 0)}, side{}))
	f.Add([]byte{})
	f.Add([]byte{recordVersionV1})
	f.Add([]byte{recordVersion})
	f.Add([]byte{recordVersion, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{recordVersion, 0, 1, 'a', 1, 'b', 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		j, hp, err := decodeJob(b)
		if err != nil {
			return
		}
		// What decodes must encode back to the same bytes, except that
		// metadata keys are written sorted and varints minimally.
		again, hp2, err := decodeJob(encodeJob(nil, j, hp))
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if hp != hp2 || !reflect.DeepEqual(j, again) {
			t.Fatalf("re-encoding changed the record:\n%+v\n%+v", j, again)
		}
	})
}

func TestUniqueValueRoundTrip(t *testing.T) {
	u := uniqueValue{holder: jobID{1, 2, 3}, until: 12345, state: backend.StateRetry}
	got, err := decodeUnique(encodeUnique(u))
	if err != nil || got != u {
		t.Fatalf("round trip = %+v, %v; want %+v", got, err, u)
	}
	if _, err := decodeUnique([]byte("garbage")); err == nil {
		t.Fatal("garbage decoded")
	}
}

// TestStateCodesAreFixed pins the on-disk state codes: changing one would
// make every existing store decode to the wrong states.
func TestStateCodesAreFixed(t *testing.T) {
	want := map[backend.State]byte{
		backend.StateScheduled: 1, backend.StatePending: 2, backend.StateActive: 3, backend.StateRetry: 4,
		backend.StateCompleted: 5, backend.StateFailed: 6, backend.StateCancelled: 7,
	}
	for _, st := range backend.States() {
		if got := stateCode(st); got != want[st] {
			t.Errorf("stateCode(%s) = %d; the on-disk code is %d", st, got, want[st])
		}
		if back, ok := stateFromCode(want[st]); !ok || back != st {
			t.Errorf("stateFromCode(%d) = %s, %v; want %s", want[st], back, ok, st)
		}
	}
	for _, c := range []byte{0, 8, 255} {
		if _, ok := stateFromCode(c); ok {
			t.Errorf("stateFromCode(%d) accepted an unknown code", c)
		}
	}
}

// encodeJobV1 writes a record as version 1 code did.
func encodeJobV1(j *backend.Job, sd side) []byte {
	return appendJobV1([]byte{recordVersionV1}, j, sd)
}

// withNewFields sets the fields new in record version 2.
func withNewFields(j *backend.Job) *backend.Job {
	j.CancelRequested = true
	j.ExpiresAt = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	j.Progress = &backend.Progress{Percent: 12.5, Message: "m", At: time.Unix(1, 2).UTC()}
	j.LogsDropped = 4
	return j
}

func TestEncodingNewFields(t *testing.T) {
	j := withNewFields(fullJob())
	sd := side{payload: true, logs: 1000}
	got, gotSide, err := decodeJob(encodeJob(nil, j, sd))
	if err != nil || gotSide != sd || !reflect.DeepEqual(got, j) {
		t.Fatalf("round trip = %+v, %+v, %v\nwant %+v", got, gotSide, err, j)
	}
	// A version 1 record has none of these; a final job's ExpiresAt is
	// what version 1 code deleted it at.
	old := fullJob()
	old.Retention = backend.RetainFor(time.Hour)
	got, gotSide, err = decodeJob(encodeJobV1(old, side{payload: true}))
	if err != nil || gotSide != (side{payload: true}) || !got.ExpiresAt.Equal(old.FinishedAt.Add(time.Hour)) {
		t.Fatalf("version 1 record = %+v, %+v, %v", got, gotSide, err)
	}
	got.ExpiresAt = time.Time{}
	if !reflect.DeepEqual(got, old) {
		t.Fatalf("version 1 record changed:\n got %+v\nwant %+v", got, old)
	}
	// The version 1 layout cannot carry CancelRequested.
	bad := encodeJobV1(j, side{})
	if _, _, err := decodeJob(bad); err == nil {
		t.Fatal("a version 1 record with the cancel-requested flag decoded")
	}
	j.Progress.Percent = 101
	if _, _, err := decodeJob(encodeJob(nil, j, sd)); err == nil {
		t.Fatal("a progress of 101% decoded")
	}
}

// TestDecoderVarints checks the decoder's numbers against encoding/binary
// for every one-byte encoding (its fast path) and some longer ones.
func TestDecoderVarints(t *testing.T) {
	var inputs [][]byte
	for c := range 0x80 {
		inputs = append(inputs, []byte{byte(c)})
	}
	for _, v := range []int64{-1 << 63, -65, -64, 63, 64, 127, 128, 1 << 40, 1<<63 - 1} {
		inputs = append(inputs, binary.AppendVarint(nil, v))
	}
	for _, b := range inputs {
		d := decoder{b: b}
		if got, want := d.varint(), mustVarint(t, b); got != want || d.err != nil || len(d.b) != 0 {
			t.Errorf("varint(%x) = %d, %v, %d bytes left; want %d", b, got, d.err, len(d.b), want)
		}
		d = decoder{b: b}
		want, _ := binary.Uvarint(b)
		if got := d.uvarint(); got != want || d.err != nil || len(d.b) != 0 {
			t.Errorf("uvarint(%x) = %d, %v, %d bytes left; want %d", b, got, d.err, len(d.b), want)
		}
	}
	for _, b := range [][]byte{nil, {0x80}, {0xff, 0xff}} {
		d := decoder{b: b}
		if d.varint(); d.err == nil {
			t.Errorf("varint(%x) took a truncated number", b)
		}
		d = decoder{b: b}
		if d.uvarint(); d.err == nil {
			t.Errorf("uvarint(%x) took a truncated number", b)
		}
	}
}

func mustVarint(t *testing.T, b []byte) int64 {
	t.Helper()
	v, n := binary.Varint(b)
	if n != len(b) {
		t.Fatalf("binary.Varint(%x) read %d bytes", b, n)
	}
	return v
}
