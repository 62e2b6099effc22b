package daemon

import (
	"bytes"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
)

// TestEncodeJobAsJSON checks that the job line written without
// reflection is byte for byte what encoding/json writes, for plain jobs
// and for those it leaves to encoding/json.
func TestEncodeJobAsJSON(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 600700800, time.UTC)
	plain := kyu.Job{ID: "01a2-b3", Type: "email.send", Queue: "default", Payload: []byte(`{"to":"a@b","n":[1,2.5,null]}`),
		Attempt: 2, MaxAttempts: 25, CreatedAt: created}
	for _, tc := range []struct {
		name   string
		fast   bool // written without reflection
		change func(j *kyu.Job)
	}{
		{"plain", true, func(j *kyu.Job) {}},
		{"no payload", true, func(j *kyu.Job) { j.Payload = nil }},
		{"all fields", true, full},
		{"zone", true, func(j *kyu.Job) { j.CreatedAt = created.In(time.FixedZone("X", -(5*3600 + 30*60))) }},
		{"negative", true, func(j *kyu.Job) { j.Attempt, j.Priority, j.Timeout = -1, -3, -time.Second }},
		{"spaced payload", false, func(j *kyu.Job) { j.Payload = []byte("{\"a\": [1, 2],\n\"b\":\"x y\"}") }},
		{"html in payload", false, func(j *kyu.Job) { j.Payload = []byte(`{"a":"<b>&"}`) }},
		{"unicode payload", false, func(j *kyu.Job) { j.Payload = []byte(`{"a":"é\u2028"}`) }},
		{"not json", false, func(j *kyu.Job) { j.Payload = []byte("plain text") }},
		{"quoted title", false, func(j *kyu.Job) { full(j); j.Title = `say "hi"\` }},
		{"unicode metadata", false, func(j *kyu.Job) { full(j); j.Metadata["k"] = "naïve\x01" }},
		{"html tag", false, func(j *kyu.Job) { full(j); j.Tags = []string{"<a>"} }},
		{"zone seconds", false, func(j *kyu.Job) { j.CreatedAt = created.In(time.FixedZone("LMT", 561)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := plain
			tc.change(&j)
			if _, fast := appendJob(nil, &j); fast != tc.fast {
				t.Errorf("written without reflection: %v; want %v", fast, tc.fast)
			}
			want, wantErr := marshalJob(&j)
			got, err := encodeJob(&j)
			if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Errorf("encodeJob:\n%s (%v)\nwant (encoding/json):\n%s (%v)", got, err, want, wantErr)
			}
		})
	}
}

// full sets every optional field of j.
func full(j *kyu.Job) {
	j.Deadline = time.Date(2027, 5, 6, 7, 8, 9, 0, time.UTC)
	j.Metadata = map[string]string{"b": "2", "a": "1", "trace-id": "abc"}
	j.Title = "Send it"
	j.Priority = 7
	j.Tags = []string{"x", "y"}
	j.Timeout = 1500 * time.Millisecond
}
