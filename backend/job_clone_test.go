package backend

import (
	"reflect"
	"testing"
	"time"
)

// TestJobCloneIsDeep checks that Clone copies every field, that
// CloneInto copies as Clone does and overwrites all of its target, that
// neither shares memory with the original; and that they know every field of a Job that refers to
// memory of its own (a field added to Job fails the test until
// CloneInto copies it too).
func TestJobCloneIsDeep(t *testing.T) {
	copied := map[string]bool{"Payload": true, "Result": true, "Tags": true, "Metadata": true, "Errors": true, "Progress": true, "Logs": true}
	typ := reflect.TypeFor[Job]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		switch f.Type.Kind() {
		case reflect.Slice, reflect.Map, reflect.Pointer, reflect.Interface, reflect.Array, reflect.Struct, reflect.Chan, reflect.Func:
			if f.Type == reflect.TypeFor[time.Time]() {
				continue
			}
			if !copied[f.Name] {
				t.Errorf("Job.%s (%s) refers to memory CloneInto does not copy", f.Name, f.Type)
			}
		}
	}

	now := time.Unix(1700000000, 5).UTC()
	full := &Job{
		ID: "x", Type: "t", Queue: "q", Payload: []byte("p"), Result: []byte("r"),
		Tags: []string{"a"}, Metadata: map[string]string{"k": "v"},
		Errors:   []AttemptError{{Attempt: 1, At: now, Message: "m"}},
		Progress: &Progress{Percent: 5, Message: "pm", At: now},
		Logs:     []LogLine{{At: now, Line: "l"}},
		RunAt:    now, State: StateActive,
	}
	empty := &Job{Payload: []byte{}, Result: []byte{}, Tags: []string{}, Metadata: map[string]string{}, Errors: []AttemptError{}, Logs: []LogLine{}}
	for _, j := range []*Job{full, {ID: "bare"}} {
		if c := j.Clone(); !reflect.DeepEqual(c, j) {
			t.Errorf("Clone = %+v, want %+v", c, j)
		}
	}
	for _, j := range []*Job{full, empty, {ID: "bare"}} {
		spare := &Job{ID: "stale", Tags: []string{"stale"}, Progress: &Progress{Message: "stale"}}
		if c, want := j.CloneInto(spare), j.Clone(); c != spare || !reflect.DeepEqual(c, want) {
			t.Errorf("CloneInto = %p %+v, want %p %+v", c, c, spare, want)
		}
	}
	for _, c := range []*Job{full.Clone(), full.CloneInto(&Job{})} {
		c.Payload[0], c.Result[0], c.Tags[0], c.Metadata["k"] = 'P', 'R', "A", "V"
		c.Errors[0].Message, c.Progress.Message, c.Logs[0].Line = "M", "PM", "L"
		if full.Payload[0] != 'p' || full.Result[0] != 'r' || full.Tags[0] != "a" || full.Metadata["k"] != "v" ||
			full.Errors[0].Message != "m" || full.Progress.Message != "pm" || full.Logs[0].Line != "l" {
			t.Fatalf("the copy shares memory with the original: %+v", full)
		}
	}
	if (*Job)(nil).Clone() != nil {
		t.Error("Clone of nil is not nil")
	}
}
