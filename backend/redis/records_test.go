package redis

import (
	"context"
	"log/slog"
	"sync"
)

// records is a slog.Handler that keeps every record at Info or above,
// for tests that check what a store logs.
type records struct {
	mu   sync.Mutex
	list []slog.Record
}

func (r *records) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, rec.Clone())
	return nil
}

func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// at returns the records kept at level l.
func (r *records) at(l slog.Level) []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []slog.Record
	for _, rec := range r.list {
		if rec.Level == l {
			out = append(out, rec)
		}
	}
	return out
}
