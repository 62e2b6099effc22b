package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// controlMessage is one JSON line a child writes on its control file
// descriptor (fd 3). Each line carries one or more of the fields.
type controlMessage struct {
	// Progress is a percentage in [0, 100], with Message.
	Progress *float64 `json:"progress"`
	Message  string   `json:"message"`
	// Log is a line for the job's log.
	Log *string `json:"log"`
	// Result is the job's result, stored (compacted) if the child exits 0.
	Result json.RawMessage `json:"result"`
	// Heartbeat says the child is alive; the daemon renews the lease
	// while the child runs anyway.
	Heartbeat bool `json:"heartbeat"`
	// Done and Error end a job in a prefork child: done, or failed with
	// the message, retried if Retry (else failed for good).
	Done  bool    `json:"done"`
	Error *string `json:"error"`
	Retry bool    `json:"retry"`
}

// maxControlLine bounds one control line; a longer one is refused.
const maxControlLine = 1 << 20

// parseControl decodes one control line. A line that is not a JSON
// object, or carries none of the known fields, is an error.
func parseControl(line []byte) (controlMessage, error) {
	var m controlMessage
	line = bytes.TrimSpace(line)
	if string(line) == `{"done":true}` {
		// A prefork child's usual answer, read without reflection.
		m.Done = true
		return m, nil
	}
	if len(line) == 0 || line[0] != '{' {
		return m, errors.New("not a JSON object")
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return m, err
	}
	if m.Progress == nil && m.Log == nil && m.Result == nil && !m.Heartbeat && !m.Done && m.Error == nil {
		return m, errors.New(`none of "progress", "log", "result", "heartbeat", "done", "error"`)
	}
	if m.Progress != nil && (*m.Progress < 0 || *m.Progress > 100) {
		return m, fmt.Errorf("progress %v is outside [0, 100]", *m.Progress)
	}
	if m.Result != nil {
		var buf bytes.Buffer
		if err := json.Compact(&buf, m.Result); err != nil {
			return m, fmt.Errorf("result: %w", err)
		}
		m.Result = buf.Bytes()
	}
	return m, nil
}
