package backend

import "testing"

// TestTextOf: TextOf keeps valid text as it is and makes anything else
// valid text, U+FFFD in place of each invalid sequence and NUL byte.
func TestTextOf(t *testing.T) {
	for in, want := range map[string]string{
		"":                  "",
		"plain":             "plain",
		"ünïcode ✓":         "ünïcode ✓",
		"bad \xff":          "bad \uFFFD",
		"nul \x00 inside":   "nul \uFFFD inside",
		"\xc3\x28 \x00\xfe": "\uFFFD( \uFFFD\uFFFD",
	} {
		got := TextOf(in)
		if got != want || !ValidText(got) {
			t.Errorf("TextOf(%q) = %q; want %q, valid text", in, got, want)
		}
	}
}
