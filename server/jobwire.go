package server

import (
	"bufio"
	"encoding/base64"
	"net/http"
	"strconv"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// jobWire is one job ready to send: its JSON without payload and result,
// which are written after it straight from the job's bytes, as JSON or as
// base64, so that a large payload or result is never copied into an
// encoding buffer (a job of a 10 MiB payload and a 10 MiB result would
// otherwise cost several times that per request).
type jobWire struct {
	head            []byte // the JSON object without its closing brace
	payload, result []byte
	payloadJSON     bool
	resultJSON      bool
}

// newJobWire encodes j's fields but payload and result.
func newJobWire(j *backend.Job) (jobWire, error) {
	rest := *j
	rest.Payload, rest.Result = nil, nil
	b, err := encodeJSON(api.FromJob(&rest))
	if err != nil {
		return jobWire{}, err
	}
	w := jobWire{head: b[:len(b)-2], payload: j.Payload, result: j.Result} // less "}\n"
	w.payloadJSON = len(w.payload) > 0 && api.TravelsAsJSON(w.payload)
	w.resultJSON = len(w.result) > 0 && api.TravelsAsJSON(w.result)
	return w, nil
}

// size is the length of the job's JSON.
func (w *jobWire) size() int {
	return len(w.head) + bytesFieldSize("payload", w.payload, w.payloadJSON) + bytesFieldSize("result", w.result, w.resultJSON) + 1
}

// bytesFieldSize is the length of `,"name":…` for b (0 when empty).
func bytesFieldSize(name string, b []byte, asJSON bool) int {
	switch {
	case len(b) == 0:
		return 0
	case asJSON:
		return len(`,"":`) + len(name) + len(b)
	}
	return len(`,"_b64":""`) + len(name) + base64.StdEncoding.EncodedLen(len(b))
}

// writeTo writes the job's JSON.
func (w *jobWire) writeTo(out *bufio.Writer) error {
	out.Write(w.head)
	writeBytesField(out, "payload", w.payload, w.payloadJSON)
	writeBytesField(out, "result", w.result, w.resultJSON)
	return out.WriteByte('}')
}

// writeBytesField writes `,"name":…` for b, as JSON or base64.
func writeBytesField(out *bufio.Writer, name string, b []byte, asJSON bool) {
	switch {
	case len(b) == 0:
	case asJSON:
		out.WriteString(`,"` + name + `":`)
		out.Write(b)
	default:
		out.WriteString(`,"` + name + `_b64":"`)
		enc := base64.NewEncoder(base64.StdEncoding, out)
		enc.Write(b)
		enc.Close()
		out.WriteByte('"')
	}
}

// writeJob answers one job with status 200.
func writeJob(w http.ResponseWriter, j *backend.Job) {
	jw, err := newJobWire(j)
	if err != nil {
		writeError(w, http.StatusInternalServerError, &api.Error{Code: api.CodeInternal, Message: "encode answer"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(jw.size()+1))
	w.WriteHeader(http.StatusOK)
	out := bufio.NewWriterSize(w, 32<<10)
	jw.writeTo(out)
	out.WriteByte('\n')
	out.Flush()
}
