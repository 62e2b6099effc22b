package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kyuhq/kyu/backend"
)

// TestBytesTravelExactly round-trips stored bytes through the wire form of
// a job, JSON-encoded and decoded, for every kind of payload; the wire
// form is valid UTF-8 whatever the bytes.
func TestBytesTravelExactly(t *testing.T) {
	for name, b := range map[string][]byte{
		"compact JSON":     []byte(`{"a":[1,2],"b":"x"}`),
		"spaced JSON":      []byte(`{ "a" : 1 }`),
		"JSON with <html>": []byte(`"<b>&"`),
		"null":             []byte(`null`),
		"binary":           {0, 1, 2, 0xff},
		"text":             []byte("plain text"),
		"number":           []byte(`42`),
		"JSON, not UTF-8":  []byte("{\"a\":\"\xff\"}"),
	} {
		j := &backend.Job{ID: "x", Payload: b, Result: b, Timeout: time.Minute}
		raw, err := json.Marshal(FromJob(j))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !utf8.Valid(raw) {
			t.Errorf("%s: the wire form is not valid UTF-8: %q", name, raw)
		}
		var back Job
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := back.Backend()
		if string(got.Payload) != string(b) || string(got.Result) != string(b) || got.Timeout != time.Minute {
			t.Errorf("%s: %q came back as payload %q, result %q", name, b, got.Payload, got.Result)
		}
	}
	if got := (&Job{}).Backend().Payload; got != nil {
		t.Errorf("an empty payload came back as %q; want nil", got)
	}
}

// TestErrorsCrossTheWire maps the contract's errors to the wire and back.
func TestErrorsCrossTheWire(t *testing.T) {
	cases := []error{
		backend.ErrNotFound, backend.ErrLeaseLost, backend.ErrJobActive,
		backend.ErrNotSupported, backend.ErrClosed, backend.ErrUniqueKeyHeld, backend.ErrWrongState,
	}
	for _, want := range cases {
		e := FromError(fmt.Errorf("context: %w", want))
		raw, _ := json.Marshal(e)
		var back Error
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		if got := back.Err(); !errors.Is(got, want) {
			t.Errorf("%v came back as %v", want, got)
		}
	}
	ve := FromError(&backend.ValidationError{Index: 3, Field: "priority", Reason: "too high"}).Err()
	var v *backend.ValidationError
	if !errors.As(ve, &v) || v.Index != 3 || v.Field != "priority" || v.Reason != "too high" {
		t.Errorf("validation error came back as %#v", ve)
	}
	se := FromError(&backend.StateError{Op: "retry", ID: "j", State: backend.StatePending}).Err()
	var s *backend.StateError
	if !errors.As(se, &s) || !errors.Is(se, backend.ErrWrongState) || s.Op != "retry" || s.State != backend.StatePending {
		t.Errorf("state error came back as %#v", se)
	}
	if FromError(errors.New("disk on fire")).Code != CodeInternal {
		t.Error("an unknown error is not internal")
	}
}

// TestBackendSharesBytes checks that converting a job or a completion for
// the store keeps the decoded payload or result rather than copying it: a
// copy of the largest payload costs its size again in every request.
func TestBackendSharesBytes(t *testing.T) {
	t.Parallel()
	b := []byte{0xff, 0, 1}
	raw := json.RawMessage(`{"a":1}`)
	nj, err := NewJob{Type: "t", PayloadB64: b}.Backend(-1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	nr, err := NewJob{Type: "t", Payload: raw}.Backend(-1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for name, pair := range map[string][2][]byte{
		"payload_b64": {nj.Payload, b},
		"payload":     {nr.Payload, raw},
		"result_b64":  {CompleteItem{ResultB64: b}.Backend().Result, b},
		"result":      {CompleteItem{Result: raw}.Backend().Result, raw},
		"job result":  {(&Job{Result: raw}).Backend().Result, raw},
	} {
		if len(pair[0]) == 0 || &pair[0][0] != &pair[1][0] {
			t.Errorf("%s: the store's form holds a copy of the decoded bytes", name)
		}
	}
}
