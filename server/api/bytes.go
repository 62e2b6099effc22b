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
	if utf8.Valid(b) && json.Valid(b) && !bytes.Equal(b, []byte("null")) && !bytes.ContainsAny(b, "<>&\u2028\u2029") {
		var c bytes.Buffer
		if json.Compact(&c, b) == nil && bytes.Equal(c.Bytes(), b) {
			return json.RawMessage(bytes.Clone(b)), nil
		}
	}
	return nil, bytes.Clone(b)
}

// joinBytes is the inverse of splitBytes: b64 wins, then raw.
func joinBytes(raw json.RawMessage, b64 []byte) []byte {
	switch {
	case len(b64) > 0:
		return bytes.Clone(b64)
	case len(raw) > 0 && !bytes.Equal(raw, []byte("null")):
		return bytes.Clone(raw)
	}
	return nil
}
