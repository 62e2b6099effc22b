package dashboard_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/server/dashboard"
)

// TestSessions checks the stateless session cookie: valid until its
// expiry, on any Sessions of the same token, and worthless once its
// expiry or signature is changed or under another token.
func TestSessions(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := dashboard.NewSessions("tok", 12*time.Hour)
	c := s.Cookie(now, "/", true)
	if !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteStrictMode || !c.Expires.Equal(now.Add(12*time.Hour)) {
		t.Fatalf("cookie %+v; want HttpOnly, Secure, SameSite=Strict, expiring in 12h", c)
	}
	with := func(v string) *http.Request {
		r, _ := http.NewRequest("GET", "/", nil)
		r.AddCookie(&http.Cookie{Name: dashboard.CookieName, Value: v})
		return r
	}
	_, sig, _ := strings.Cut(c.Value, ".")
	cases := []struct {
		name  string
		s     *dashboard.Sessions
		value string
		at    time.Time
		want  bool
	}{
		{"fresh", s, c.Value, now, true},
		{"another server, same token", dashboard.NewSessions("tok", time.Hour), c.Value, now.Add(11 * time.Hour), true},
		{"expired", s, c.Value, now.Add(12 * time.Hour), false},
		{"another token", dashboard.NewSessions("other", 12*time.Hour), c.Value, now, false},
		{"later expiry, old signature", s, "9999999999." + sig, now, false},
		{"no signature", s, "9999999999", now, false},
		{"empty", s, "", now, false},
	}
	for _, tc := range cases {
		if got := tc.s.Valid(with(tc.value), tc.at); got != tc.want {
			t.Errorf("%s: Valid = %v; want %v", tc.name, got, tc.want)
		}
	}
	if !s.CheckToken("tok") || s.CheckToken("to") || s.CheckToken("") {
		t.Error("CheckToken takes a wrong token or refuses the right one")
	}
}
