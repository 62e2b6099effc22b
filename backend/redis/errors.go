package redis

import "errors"

// Errors from Open and from reads, for errors.Is; the returned error's text
// says more (the server, the prefix, the job and field).
var (
	// ErrPrefixInUse: the key prefix holds keys that kyu did not write.
	ErrPrefixInUse = errors.New("kyu/redis: key prefix is in use by something other than kyu")
	// ErrNewerFormat: the prefix was written by a newer kyu.
	ErrNewerFormat = errors.New("kyu/redis: store format is newer than this kyu")
	// ErrOlderFormat: the prefix was written by an older kyu whose layout
	// this one does not read (format 1 lacks the per-state sets and
	// counters that List and Stats read).
	ErrOlderFormat = errors.New("kyu/redis: store format is older than this kyu reads")
	// ErrCorrupt: a stored job does not parse (edited by hand, or written
	// by something else).
	ErrCorrupt = errors.New("kyu/redis: stored job is corrupt")
	// ErrBadURL: the URL does not name a Redis store this package can open.
	ErrBadURL = errors.New("kyu/redis: bad URL")
)
