package backendtest

import (
	"net/url"
	"os"
	"strings"
	"testing"
)

// RequireEnv names the variable that turns a missing test server from a
// skip into a failure: KYU_TEST_REQUIRE=all (as .ci/run sets) requires every
// backend, and a comma-separated list such as "redis,postgres" requires
// those named.
const RequireEnv = "KYU_TEST_REQUIRE"

// ServiceURL returns the URL of the test server for a backend: the value of
// the environment variable envVar, or defaultURL when it is unset.
func ServiceURL(envVar, defaultURL string) string {
	if v, ok := os.LookupEnv(envVar); ok && v != "" {
		return v
	}
	return defaultURL
}

// Required reports whether the tests of the backend called name must fail,
// rather than skip, when its server cannot be reached.
func Required(name string) bool {
	v := os.Getenv(RequireEnv)
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "all" || part == name {
			return true
		}
	}
	return false
}

// Unreachable ends a test whose backend server could not be reached: it
// fails when the backend is Required and skips otherwise, saying which
// server was tried (without its password) and how to point the tests at
// another.
func Unreachable(t testing.TB, name, envVar, rawURL string, err error) {
	t.Helper()
	msg := name + " test server " + redact(rawURL) + " unreachable (" + err.Error() + "); set " + envVar + " to point at one"
	if Required(name) {
		t.Fatalf("%s; %s requires it", msg, RequireEnv)
	}
	t.Skipf("%s, or set %s=all to make this a failure", msg, RequireEnv)
}

// redact hides a URL's password.
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
