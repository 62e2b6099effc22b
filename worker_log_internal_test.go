package kyu

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestWorkerConfigDefaultLoggerWarnsOnStderr(t *testing.T) {
	t.Parallel()
	h := WorkerConfig{}.withDefaults().Logger.Handler()
	if _, ok := h.(*slog.TextHandler); !ok {
		t.Fatalf("default handler is %T, want *slog.TextHandler", h)
	}
	ctx := context.Background()
	if !h.Enabled(ctx, slog.LevelWarn) || !h.Enabled(ctx, slog.LevelError) || h.Enabled(ctx, slog.LevelInfo) {
		t.Fatalf("default handler enables warn %v, error %v, info %v; want warn and error only",
			h.Enabled(ctx, slog.LevelWarn), h.Enabled(ctx, slog.LevelError), h.Enabled(ctx, slog.LevelInfo))
	}
	var buf bytes.Buffer
	log := defaultLogger(&buf)
	log.Info("kyu: routine")
	log.Error("kyu: job failed for good", "job_id", "j1")
	if got := buf.String(); strings.Contains(got, "routine") || !strings.Contains(got, `level=ERROR msg="kyu: job failed for good" job_id=j1`) {
		t.Fatalf("default logger wrote %q; want the error line only, as text", got)
	}
}
