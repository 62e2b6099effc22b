package pebble

import "errors"

// Errors from Open, for errors.Is; the returned error's text says more (the
// directory, the holder of the lock, the versions).
var (
	// ErrLocked: another process, or another Store in this process, holds
	// the directory.
	ErrLocked = errors.New("kyu/pebble: store is locked")
	// ErrNotStore: the directory is not empty and is not a kyu store, or
	// its files are damaged.
	ErrNotStore = errors.New("kyu/pebble: not a kyu store")
	// ErrNewerFormat: the store was written by a newer kyu.
	ErrNewerFormat = errors.New("kyu/pebble: store format is newer than this kyu")
)

// ErrCorrupt: the store's data files are damaged; the error says where.
var ErrCorrupt = errors.New("kyu/pebble: store is damaged")

// ErrDataMissing: the data files lack writes that the store made durable
// and acknowledged (the data directory was emptied, replaced or restored
// from an older copy). Options.AcceptDataLoss opens the store anyway.
var ErrDataMissing = errors.New("kyu/pebble: acknowledged data is missing")
