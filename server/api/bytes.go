package api

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// splitBytes chooses how stored bytes travel: as JSON when they are a
// compact JSON value other than null, valid UTF-8 (which json.Valid does
// not check: a raw invalid byte would make the whole answer invalid JSON
// to other languages' decoders), free of the characters an encoder may
// escape (<, >, &, U+2028, U+2029), so that any re-encoding keeps them
// byte for byte and null keeps meaning "none"; as base64 otherwise. Empty
// bytes travel as neither.
func splitBytes(b []byte) (raw json.RawMessage, b64 []byte) {
	if len(b) == 0 {
		return nil, nil
	}
	if TravelsAsJSON(b) {
		return json.RawMessage(bytes.Clone(b)), nil
	}
	return nil, bytes.Clone(b)
}

// TravelsAsJSON reports whether non-empty stored bytes travel as JSON
// (payload, result) rather than as base64 (payload_b64, result_b64): a
// compact JSON value other than null, valid UTF-8, free of <, >, &, U+2028
// and U+2029.
func TravelsAsJSON(b []byte) bool {
	return utf8.Valid(b) && json.Valid(b) && !bytes.Equal(b, []byte("null")) && !bytes.ContainsAny(b, "<>&\u2028\u2029") && compact(b)
}

// compact reports whether valid JSON holds no whitespace outside its
// strings, as json.Compact would leave it.
func compact(b []byte) bool {
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return false
		}
	}
	return true
}

// joinBytes is the inverse of splitBytes: b64 wins, then raw. It returns
// the bytes given, not a copy: they come fresh from decoding, and a copy
// of a payload or result of the largest size costs its size again.
func joinBytes(raw json.RawMessage, b64 []byte) []byte {
	switch {
	case len(b64) > 0:
		return b64
	case len(raw) > 0 && !bytes.Equal(raw, []byte("null")):
		return raw
	}
	return nil
}
