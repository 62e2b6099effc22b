package backend

import (
	"strings"
	"unicode/utf8"
)

// ValidText reports whether s may be stored as text by every store: valid
// UTF-8 without NUL bytes (PostgreSQL's text and jsonb refuse both). Job
// types, titles, unique keys, tags, metadata, log lines, progress messages
// and worker entries are text; payloads and results are bytes and carry
// anything.
func ValidText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// textReason is the reason given for text that is not ValidText.
const textReason = "must be valid UTF-8 without NUL bytes"
