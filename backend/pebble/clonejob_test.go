package pebble

import (
	"reflect"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestCloneJobIsDeep checks that cloneJob copies a job as Job.Clone does,
// into the spare it is given, sharing no memory with the original; and
// that it knows every field of a Job that refers to memory of its own
// (a field added to Job fails it until cloneJob copies it too).
func TestCloneJobIsDeep(t *testing.T) {
	copied := map[string]bool{"Payload": true, "Result": true, "Tags": true, "Metadata": true, "Errors": true, "Progress": true, "Logs": true}
	typ := reflect.TypeFor[backend.Job]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		switch f.Type.Kind() {
		case reflect.Slice, reflect.Map, reflect.Pointer, reflect.Interface, reflect.Array, reflect.Struct, reflect.Chan, reflect.Func:
			if f.Type == reflect.TypeFor[time.Time]() {
				continue
			}
			if !copied[f.Name] {
				t.Errorf("Job.%s (%s) refers to memory cloneJob does not copy", f.Name, f.Type)
			}
		}
	}

	now := time.Unix(1700000000, 5).UTC()
	full := &backend.Job{
		ID: "x", Type: "t", Queue: "q", Payload: []byte("p"), Result: []byte("r"),
		Tags: []string{"a"}, Metadata: map[string]string{"k": "v"},
		Errors:   []backend.AttemptError{{Attempt: 1, At: now, Message: "m"}},
		Progress: &backend.Progress{Percent: 5, Message: "pm", At: now},
		Logs:     []backend.LogLine{{At: now, Line: "l"}},
		RunAt:    now, State: backend.StateActive,
	}
	empty := &backend.Job{Payload: []byte{}, Result: []byte{}, Tags: []string{}, Metadata: map[string]string{}, Errors: []backend.AttemptError{}, Logs: []backend.LogLine{}}
	for _, j := range []*backend.Job{full, empty, {ID: "bare"}} {
		spare := &backend.Job{ID: "stale", Tags: []string{"stale"}}
		c := cloneJob(j, spare)
		if c != spare {
			t.Fatalf("cloneJob did not use its spare")
		}
		if want := j.Clone(); !reflect.DeepEqual(c, want) {
			t.Errorf("cloneJob = %+v, want %+v", c, want)
		}
		if c2 := cloneJob(j, nil); !reflect.DeepEqual(c2, j.Clone()) {
			t.Errorf("cloneJob without a spare = %+v, want %+v", c2, j.Clone())
		}
	}
	c := cloneJob(full, &backend.Job{})
	c.Payload[0], c.Result[0], c.Tags[0], c.Metadata["k"] = 'P', 'R', "A", "V"
	c.Errors[0].Message, c.Progress.Message, c.Logs[0].Line = "M", "PM", "L"
	if full.Payload[0] != 'p' || full.Result[0] != 'r' || full.Tags[0] != "a" || full.Metadata["k"] != "v" ||
		full.Errors[0].Message != "m" || full.Progress.Message != "pm" || full.Logs[0].Line != "l" {
		t.Errorf("the copy shares memory with the original: %+v", full)
	}
}
