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

// TestTruncateText: a text over its limit is cut at a rune boundary and
// ends with an ellipsis, all within the limit; a text that fits is kept.
func TestTruncateText(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 10, "abcdefg…"},
		{"ééééé", 8, "éé…"}, // 10 bytes; a cut inside an é moves back
		{"abc", 2, ""},
		{"", 0, ""},
	} {
		got := TruncateText(c.in, c.max)
		if got != c.want || len(got) > c.max && c.in != got || !ValidText(got) {
			t.Errorf("TruncateText(%q, %d) = %q; want %q", c.in, c.max, got, c.want)
		}
	}
}
