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

// TestConformanceFormat2 runs the suite against stores marked with
// format 2, as a kyu of format 2 made them: long headers only.
func TestConformanceFormat2(t *testing.T) {
	openTestFormat(t, 2)
	backendtest.Run(t, func(t *testing.T) backend.Backend {
		return openTestFormat(t, 2)
	})
}
