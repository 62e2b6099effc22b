package pebble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	cpebble "github.com/cockroachdb/pebble/v2"
)

// engineFault records the first failure Pebble reports from inside itself,
// often from a background goroutine (a damaged table met by the table
// statistics or a compaction, a failed MANIFEST write): a Fatalf through
// the logger, or a data corruption event. Such a failure must not crash
// the process; it breaks the store instead, as a failed commit does, so
// every later operation returns it and /readyz fails. Open returns it
// when it happens while opening.
//
// It has its own lock, not Store.mu, because Pebble may report from
// inside a call the store makes while holding mu.
type engineFault struct {
	log   *slog.Logger
	err   atomic.Pointer[error]
	fired chan struct{} // closed when err is set
}

func newEngineFault(log *slog.Logger) *engineFault {
	return &engineFault{log: log, fired: make(chan struct{})}
}

// set records err unless a failure is recorded already, and logs it.
func (f *engineFault) set(err error) {
	if !f.err.CompareAndSwap(nil, &err) {
		return
	}
	close(f.fired)
	f.log.Error("the storage engine failed; the store stops serving", "err", err)
}

// failed returns the recorded failure, or nil.
func (f *engineFault) failed() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

// dataCorruption records a damaged file that Pebble found.
func (f *engineFault) dataCorruption(info cpebble.DataCorruptionInfo) {
	f.set(fmt.Errorf("%w: %s: %v", ErrCorrupt, info.Path, info.Details))
}

// backgroundError logs an error of Pebble's background work (flushes,
// compactions, table statistics). Pebble retries such work; once the
// store has failed, the repeats are logged at debug level only.
func (f *engineFault) backgroundError(err error) {
	level := slog.LevelError
	if f.failed() != nil {
		level = slog.LevelDebug
	}
	f.log.Log(context.Background(), level, "pebble: background error", "component", "pebble", "err", err)
}

// pebbleLogger sends Pebble's log lines to slog. Fatalf, which Pebble
// calls when it cannot go on, records the failure instead of ending the
// process.
type pebbleLogger struct {
	l     *slog.Logger
	fault *engineFault
}

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.fault.set(errors.New("pebble: " + fmt.Sprintf(format, args...)))
}
