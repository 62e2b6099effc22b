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

// attr is the value of the record's attribute key, and whether it has one.
func attr(rec slog.Record, key string) (slog.Value, bool) {
	var v slog.Value
	found := false
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v, found = a.Value, true
			return false
		}
		return true
	})
	return v, found
}
