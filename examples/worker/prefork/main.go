// Command prefork is a prefork child for kyu worker, in Go (see
// docs/worker.md): it lives for many jobs, reading one job object per
// line on stdin and ending each with {"done":true} or
// {"error":…,"retry":…} on fd 3, until its stdin ends.
//
//	go build -o prefork-child ./examples/worker/prefork
//	kyu worker --config worker.toml   # [handlers.t] command = ["./prefork-child"], prefork = 4
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

// job is the part of the job object this child reads.
type job struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

func main() {
	control := bufio.NewWriter(os.NewFile(3, "control"))
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 16<<20)
	for in.Scan() {
		var j job
		if err := json.Unmarshal(in.Bytes(), &j); err != nil {
			fmt.Fprintf(control, "{\"error\":%q,\"retry\":false}\n", err.Error())
		} else {
			// The work goes here; this child only reports the payload's size.
			fmt.Fprintf(control, "{\"result\":{\"bytes\":%d},\"done\":true}\n", len(j.Payload))
		}
		if err := control.Flush(); err != nil {
			os.Exit(1)
		}
	}
}
