package faktory

import "testing"

func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true},
		{"*", "anything", true},
		{"*uid:12345*", `{"args":["uid:12345"]}`, true},
		{"*uid:12345*", `{"args":["uid:1234"]}`, false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"a[bx]c", "axc", true},
		{"a[^bx]c", "axc", false},
		{"a[^bx]c", "ayc", true},
		{"a[a-c]d", "abd", true},
		{"a[a-c]d", "azd", false},
		{`a\*b`, "a*b", true},
		{`a\*b`, "axb", false},
		{"a[b", "a[b", true},
		{"*a*b*c", "xaxxbxxc", true},
		{"*a*b*c", "xaxxbxxcx", false},
		{"abc", "abcd", false},
	} {
		if got := globMatch(c.p, c.s); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", c.p, c.s, got, c.want)
		}
	}
}
