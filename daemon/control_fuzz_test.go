package daemon

import (
	"encoding/json"
	"testing"
)

// FuzzParseControl checks that any line a child writes on fd 3 is either
// refused or read as a message whose result is compact, valid JSON and
// whose progress is in [0, 100].
func FuzzParseControl(f *testing.F) {
	for _, seed := range []string{
		`{"progress":42,"message":"half"}`, `{"log":"x"}`, `{"result": {"a": [1, 2]}}`,
		`{"heartbeat":true}`, `{"done":true,"result":null}`, `{"error":"e","retry":true}`,
		`garbage`, `{}`, `{"progress":101}`, `{"result":}`, "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		m, err := parseControl([]byte(line))
		if err != nil {
			return
		}
		if m.Result != nil && !json.Valid(m.Result) {
			t.Errorf("result %q is not JSON", m.Result)
		}
		if m.Progress != nil && (*m.Progress < 0 || *m.Progress > 100) {
			t.Errorf("progress %v accepted", *m.Progress)
		}
	})
}
