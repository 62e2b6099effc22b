package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// writeJSON sends v as JSON with status. HTML escaping is off, so stored
// JSON payloads travel byte for byte.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := encodeJSON(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, &api.Error{Code: api.CodeInternal, Message: "encode answer"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// encodeJSON encodes v without HTML escaping, ending with a newline.
func encodeJSON(v any) ([]byte, error) {
	if e, ok := v.(api.Enqueued); ok {
		if b, ok := appendEnqueued(make([]byte, 0, 64), e); ok {
			return b, nil
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// appendEnqueued appends the answer to a single enqueue, the most frequent
// answer of all, as encodeJSON would write it, without reflection. It
// declines (false) strings that would need escaping.
func appendEnqueued(b []byte, e api.Enqueued) ([]byte, bool) {
	if !plainJSON(e.ID) || !plainJSON(string(e.State)) {
		return nil, false
	}
	b = append(b, `{"id":"`...)
	b = append(b, e.ID...)
	b = append(b, `","state":"`...)
	b = append(b, e.State...)
	b = append(b, '"')
	if e.Duplicate {
		b = append(b, `,"duplicate":true`...)
	}
	return append(b, "}\n"...), true
}

// plainJSON reports whether s is printable ASCII that a JSON string holds
// as it is (no quote, backslash or control character).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// writeError sends an error answer.
func writeError(w http.ResponseWriter, status int, e *api.Error) {
	b, _ := encodeJSON(api.ErrorBody{Error: *e})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(b)
}

// statusOf is the HTTP status of an API error code.
func statusOf(code string) int {
	switch code {
	case api.CodeInvalid:
		return http.StatusBadRequest
	case api.CodeUnauthorized:
		return http.StatusUnauthorized
	case api.CodeNotFound:
		return http.StatusNotFound
	case api.CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case api.CodeDuplicate, api.CodeLeaseLost, api.CodeJobActive, api.CodeWrongState, api.CodeUniqueKeyHeld, api.CodeIdempotencyConflict:
		return http.StatusConflict
	case api.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case api.CodeUnsupportedMedia:
		return http.StatusUnsupportedMediaType
	case api.CodeNotImplemented:
		return http.StatusNotImplemented
	case api.CodeUnavailable, api.CodeClosed:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// fail answers err from the store or from reading the request.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, &api.Error{Code: api.CodeTooLarge, Message: "the request body is over the limit of " + itoa(tooBig.Limit) + " bytes"})
		return
	}
	var we *api.Error
	if errors.As(err, &we) {
		writeError(w, statusOf(we.Code), we)
		return
	}
	e := api.FromError(err)
	if e.Code == api.CodeInternal {
		s.log.Error("kyu server: request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	writeError(w, statusOf(e.Code), e)
}

// badRequest builds a 400 error naming a field.
func badRequest(field, msg string) *api.Error {
	return &api.Error{Code: api.CodeInvalid, Message: field + ": " + msg, Field: field, Reason: msg}
}

// readBody reads a JSON request body (within the body limit) and checks
// its media type: application/json, or none given.
func readBody(r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && mt != "application/problem+json") {
			return nil, &api.Error{Code: api.CodeUnsupportedMedia, Message: "the body must be application/json, not " + ct}
		}
	}
	return readAll(r.Body, r.ContentLength)
}

// readAll reads r to its end. A declared length sizes the buffer, which
// saves io.ReadAll's regrowths and copies: up to 1 MiB at once, and the
// whole declared length once the first MiB has arrived (a declared length
// alone does not buy a large buffer).
func readAll(r io.Reader, declared int64) ([]byte, error) {
	if declared <= 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, min(declared, 1<<20)+1) // a spare byte to see the end without growing
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			if int64(len(b)) < declared { // the first MiB came: room for the rest
				b = append(make([]byte, 0, declared+1), b...)
			} else { // longer than declared: grow
				b = append(b, 0)[:len(b)]
			}
		}
	}
}

// decodeBody reads the JSON body into v, refusing unknown fields and
// trailing data. An empty body leaves v as it is when allowEmpty.
func decodeBody(r *http.Request, v any, allowEmpty bool) error {
	b, err := readBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		if allowEmpty {
			return nil
		}
		return badRequest("body", "a JSON body is required")
	}
	return decodeJSON(b, v)
}

// decodeJSON decodes one JSON value strictly.
func decodeJSON(b []byte, v any) error {
	return decodeItem(b, v, -1)
}

// decodeItem decodes one JSON value strictly into v; a failure is a
// validation error naming the field at fault and, in a batch, the index.
func decodeItem(b []byte, v any, index int) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		field, reason := faultyField(b, v, err)
		e := badRequest(field, reason)
		if index >= 0 {
			e.Index = &index
		}
		return e
	}
	if dec.More() {
		return badRequest("body", "trailing data after the JSON value")
	}
	return nil
}

// faultyField finds which field of a JSON object made decoding into v
// fail, by decoding the fields one at a time into fresh values of v's
// type; it gives "body" when the value is not an object or no single
// field fails.
func faultyField(b []byte, v any, err error) (field, reason string) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) == nil {
		for name, raw := range fields {
			one, _ := json.Marshal(map[string]json.RawMessage{name: raw})
			fresh := reflect.New(reflect.TypeOf(v).Elem()).Interface()
			dec := json.NewDecoder(bytes.NewReader(one))
			dec.DisallowUnknownFields()
			if ferr := dec.Decode(fresh); ferr != nil {
				var ve *backend.ValidationError
				if errors.As(ferr, &ve) {
					return name, ve.Reason
				}
				return name, ferr.Error()
			}
		}
	}
	return jsonField(err), "malformed JSON: " + err.Error()
}

// itoa formats an int64.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// jsonField names the field a decoding error is about, or "body".
func jsonField(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return te.Field
	}
	return "body"
}
