package redis

import (
	"testing"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/backendtest"
)

// TestConformance runs the suite against the shared test server, each
// store in a key prefix of its own.
func TestConformance(t *testing.T) {
	openTest(t, "") // skip or fail at once when the server is unreachable
	backendtest.Run(t, func(t *testing.T) backend.Backend {
		return openTest(t, "")
	})
}
