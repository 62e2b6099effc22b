package server

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
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
	case api.CodeForbidden:
		return http.StatusForbidden
	case api.CodeNotFound:
		return http.StatusNotFound
	case api.CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case api.CodeRequestTimeout:
		return http.StatusRequestTimeout
	case api.CodeDuplicate, api.CodeLeaseLost, api.CodeJobActive, api.CodeWrongState, api.CodeUniqueKeyHeld, api.CodeIdempotencyConflict:
		return http.StatusConflict
	case api.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case api.CodeUnsupportedMedia:
		return http.StatusUnsupportedMediaType
	case api.CodeHeadersTooLarge:
		return http.StatusRequestHeaderFieldsTooLarge
	case api.CodeNotImplemented:
		return http.StatusNotImplemented
	case api.CodeUnavailable, api.CodeClosed:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// fail answers err from the store or from reading the request.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var unread *bodyError
	if errors.As(err, &unread) {
		status, e := unread.answer()
		s.log.Debug("kyu server: unreadable request body", "method", r.Method, "path", r.URL.Path, "error", err)
		writeError(w, status, e)
		return
	}
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
	return decodeJSON(b, v, false)
}

// decodeJSON decodes one JSON value strictly into v: field names match
// exactly (no case folding), an object names a field once, unknown fields,
// trailing data and invalid UTF-8 anywhere (payload and result included)
// are refused. A failure is a validation error naming the field at fault
// by its path ("type", "items.0.result"); in a batch body (an array of
// jobs) the leading index is the error's index instead.
func decodeJSON(b []byte, v any, batch bool) error {
	// Base64 with line breaks (as MIME encoders write it) stays accepted.
	err := jsonv2.Unmarshal(b, v, jsonv2.RejectUnknownMembers(true), jsonv1.ParseBytesWithLooseRFC4648(true))
	if err == nil {
		return nil
	}
	return decodeError(err, batch)
}

// decodeError turns a decoding error into a validation error.
func decodeError(err error, batch bool) *api.Error {
	var (
		ptr    jsontext.Pointer
		reason string
		se     *jsonv2.SemanticError
		syn    *jsontext.SyntacticError
		ve     *backend.ValidationError
	)
	switch {
	case errors.As(err, &syn):
		ptr = syn.JSONPointer
		switch {
		case errors.Is(syn.Err, jsontext.ErrDuplicateName):
			reason = "duplicate field"
		case syn.Err != nil && strings.Contains(syn.Err.Error(), "UTF-8"):
			reason = "invalid UTF-8 in a string (binary payloads and results travel as payload_b64 and result_b64)"
		default:
			reason = "malformed JSON: " + strings.TrimPrefix(syn.Error(), "jsontext: ")
		}
	case errors.As(err, &se):
		ptr = se.JSONPointer
		switch {
		case errors.Is(se.Err, jsonv2.ErrUnknownName):
			reason = "unknown field (names are case-sensitive)"
		case errors.As(se.Err, &ve):
			reason = ve.Reason
		case se.JSONKind == '0' && se.GoType != nil && goKind(se.GoType) == "an integer":
			reason = "want an integer within range, not " + string(se.JSONValue)
		case se.JSONKind != 0 && se.JSONKind != '"' && se.GoType != nil && goKind(se.GoType) == "a string":
			reason = "want a string, not " + jsonKind(se.JSONKind)
		case se.Err != nil:
			reason = se.Err.Error()
		case se.JSONKind != 0 && se.GoType != nil:
			reason = "want " + goKind(se.GoType) + ", not " + jsonKind(se.JSONKind)
		default:
			reason = strings.TrimPrefix(se.Error(), "json: ")
		}
	default:
		reason = "malformed JSON: " + err.Error()
	}
	tokens := slices.Collect(ptr.Tokens())
	index := -1
	if batch && len(tokens) > 0 {
		if n, err := strconv.Atoi(tokens[0]); err == nil {
			index, tokens = n, tokens[1:]
		}
	}
	field := strings.Join(tokens, ".")
	if field == "" {
		field = "body"
	}
	e := badRequest(field, reason)
	if index >= 0 {
		e.Index = &index
	}
	return e
}

// jsonKind names a kind of JSON value, for a decoding error.
func jsonKind(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return k.String()
}

// goKind names what a Go type holds, for a decoding error.
func goKind(t reflect.Type) string {
	if reflect.PointerTo(t).Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "base64 bytes"
		}
		return "an array"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	}
	return t.String()
}

// itoa formats an int64.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }
