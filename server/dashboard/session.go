package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// CookieName names the dashboard's session cookie.
const CookieName = "kyu_session"

// Sessions issues and checks dashboard logins without keeping state: a
// session cookie holds its expiry and an HMAC of it keyed from the token,
// so it is valid on every server that shares the token until it expires,
// and changing the token ends every session.
type Sessions struct {
	key   []byte
	token [sha256.Size]byte
	ttl   time.Duration
}

// NewSessions returns the sessions of a server whose token is token; a
// login lasts ttl.
func NewSessions(token string, ttl time.Duration) *Sessions {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("kyu dashboard session v1"))
	return &Sessions{key: mac.Sum(nil), token: sha256.Sum256([]byte(token)), ttl: ttl}
}

// CheckToken reports whether got is the token, in time that does not
// depend on how much of it is right.
func (s *Sessions) CheckToken(got string) bool {
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], s.token[:]) == 1
}

// Cookie is a session cookie valid from now for the session's length,
// sent only under path; secure marks it for HTTPS only.
func (s *Sessions) Cookie(now time.Time, path string, secure bool) *http.Cookie {
	exp := now.Add(s.ttl).Unix()
	v := strconv.FormatInt(exp, 10) + "." + s.sign(exp)
	return &http.Cookie{
		Name: CookieName, Value: v, Path: path, Expires: time.Unix(exp, 0),
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode,
	}
}

// ClearCookie is the cookie that ends a session in the browser.
func ClearCookie(path string, secure bool) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: "", Path: path, MaxAge: -1,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode}
}

// Valid reports whether r carries a session cookie that is authentic and
// not expired at now.
func (s *Sessions) Valid(r *http.Request, now time.Time) bool {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return false
	}
	expText, sig, ok := strings.Cut(c.Value, ".")
	if !ok {
		return false
	}
	exp, err := strconv.ParseInt(expText, 10, 64)
	if err != nil || now.Unix() >= exp {
		return false
	}
	return hmac.Equal([]byte(sig), []byte(s.sign(exp)))
}

// sign is the HMAC of an expiry.
func (s *Sessions) sign(exp int64) string {
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(strconv.FormatInt(exp, 10)))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}
