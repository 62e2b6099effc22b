package backend

import (
	"strings"
	"unicode/utf8"
)

// ValidText reports whether s may be stored as text by every store: valid
// UTF-8 without NUL bytes (PostgreSQL's text and jsonb refuse both). Job
// types, titles, unique keys, tags, metadata, log lines, progress messages,
// failure messages and stacks and worker entries are text; payloads and
// results are bytes and carry anything.
func ValidText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// TextOf returns s as valid text (see ValidText): each invalid UTF-8
// sequence and each NUL byte becomes U+FFFD. It is for text kyu builds
// from what it does not control, such as a handler error's message.
func TextOf(s string) string {
	if ValidText(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// textReason is the reason given for text that is not ValidText.
const textReason = "must be valid UTF-8 without NUL bytes"

// TruncateText cuts s to at most max bytes at a UTF-8 boundary, ending a
// cut text with "…" (within max), for a record with a size limit, such as
// a failure's message. It returns s when it fits.
func TruncateText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const ellipsis = "…"
	if max < len(ellipsis) {
		return ""
	}
	cut := max - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
