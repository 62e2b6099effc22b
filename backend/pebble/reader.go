package pebble

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	cpebble "github.com/cockroachdb/pebble/v2"
)

// pointReader reads keys of one prefix for one operation through a single
// Pebble iterator, opened on first use. Operations read their jobs mostly
// in id order (claim order is FIFO within a priority, and ids are
// time-ordered), so consecutive reads land in blocks the iterator already
// holds instead of each building a fresh lookup through every level.
// SeekPrefixGE matches the exact key only, so a missing key never walks
// over the tombstones after it.
//
// The iterator sees what was committed when it was opened: callers open
// it under Store.mu (records with writes in flight are read from the dirty
// map instead), or read keys that are written once (payloads).
type pointReader struct {
	db     *cpebble.DB
	prefix byte
	it     *cpebble.Iterator
	err    error
}

// Get returns the value of key (valid until the next call), or
// cpebble.ErrNotFound. The closer is a no-op, to match reader.
func (r *pointReader) Get(key []byte) ([]byte, io.Closer, error) {
	if r.err != nil {
		return nil, nil, r.err
	}
	if r.it == nil {
		r.it, r.err = r.db.NewIter(&cpebble.IterOptions{LowerBound: []byte{r.prefix}, UpperBound: []byte{r.prefix + 1}})
		if r.err != nil {
			r.err = fmt.Errorf("open iterator: %w", r.err)
			return nil, nil, r.err
		}
	}
	if !r.it.SeekPrefixGE(key) || !bytes.Equal(r.it.Key(), key) {
		if err := r.it.Error(); err != nil {
			return nil, nil, err
		}
		return nil, nil, cpebble.ErrNotFound
	}
	v, err := r.it.ValueAndErr()
	if err != nil {
		return nil, nil, err
	}
	return v, nopCloser{}, nil
}

// Close releases the iterator.
func (r *pointReader) Close() error {
	r.err = nil
	if r.it == nil {
		return nil
	}
	err := r.it.Close()
	r.it = nil
	if err != nil && !errors.Is(err, cpebble.ErrNotFound) {
		return err
	}
	return nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
