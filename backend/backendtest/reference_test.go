package backendtest_test

import (
	"testing"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/backendtest"
	"github.com/kyuhq/kyu/backend/memory"
)

// TestReference runs the suite against backend/memory, a plain reading of
// the settled semantics: if a real store fails where memory passes,
// compare the two against the doc.
func TestReference(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backend.Backend {
		s := memory.New()
		t.Cleanup(func() { s.Close() })
		return s
	})
}
