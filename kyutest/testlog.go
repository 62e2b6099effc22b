package kyutest

import (
	"log/slog"
	"testing"
)

// testLogger writes a worker's warnings and errors (a handler's panic, a
// store that fails) to the test's output, beside the test's own lines.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}
