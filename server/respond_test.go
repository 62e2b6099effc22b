package server

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// TestEncodeEnqueuedMatchesEncodingJSON: the hand-written encoding of the
// single-enqueue answer gives the bytes encoding/json gives, and strings
// that need escaping go to encoding/json.
func TestEncodeEnqueuedMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, e := range []api.Enqueued{
		{ID: "01JD5Y3ZQ8V6W0000000000000", State: backend.StatePending},
		{ID: "01JD5Y3ZQ8V6W0000000000000", State: backend.StateScheduled, Duplicate: true},
		{ID: "", State: ""},
		{ID: `quote"inside`, State: backend.StatePending},
		{ID: `back\slash`, State: backend.StatePending},
		{ID: "tab\there", State: backend.StatePending},
		{ID: "<html>&", State: backend.StatePending},
		{ID: "ünïcode\u2028", State: backend.StatePending},
		{ID: "bad\xffutf8", State: backend.StatePending},
	} {
		got, err := encodeJSON(e)
		if err != nil {
			t.Fatalf("encodeJSON(%+v): %v", e, err)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("encodeJSON(%+v) = %q; encoding/json gives %q", e, got, want.Bytes())
		}
	}
	if _, ok := appendEnqueued(nil, api.Enqueued{ID: `a"b`, State: backend.StatePending}); ok {
		t.Error("appendEnqueued took an id that needs escaping")
	}
}

// TestReadAllAnyDeclaredLength: the body comes back whole whether its
// declared length is right, short, long or unknown.
func TestReadAllAnyDeclaredLength(t *testing.T) {
	t.Parallel()
	body := bytes.Repeat([]byte("0123456789"), 200)
	for _, declared := range []int64{-1, 0, 1, 10, 1999, 2000, 2001, 5000, 2 << 20} {
		got, err := readAll(&trickle{b: body}, declared)
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("declared %d: got %d bytes, %v; want the %d bytes", declared, len(got), err, len(body))
		}
	}
	got, err := readAll(bytes.NewReader(nil), 0)
	if err != nil || len(got) != 0 {
		t.Errorf("empty body: %q, %v", got, err)
	}
}

// trickle reads at most 7 bytes per call.
type trickle struct{ b []byte }

func (r *trickle) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 7)], r.b)
	r.b = r.b[n:]
	return n, nil
}
