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
//
// getOnward reads keys that exist in ascending order with a step where it
// can instead of a seek: see onwardReader.
type pointReader struct {
	db     *cpebble.DB
	prefix byte
	it     *cpebble.Iterator
	err    error
	// onward says the iterator was last positioned by getOnward (not by
	// Get's prefix seek, after which it cannot step), so it may step on.
	onward bool
	// key holds the last key idKey built.
	key [1 + len(jobID{})]byte
}

// idKey returns the key of id under the reader's prefix, valid until the
// next call: a key built without an allocation, for Pebble copies the
// keys it is given.
func (r *pointReader) idKey(id jobID) []byte {
	r.key[0] = r.prefix
	copy(r.key[1:], id[:])
	return r.key[:]
}

// open opens the iterator on first use.
func (r *pointReader) open() error {
	if r.err == nil && r.it == nil {
		r.it, r.err = r.db.NewIter(&cpebble.IterOptions{LowerBound: []byte{r.prefix}, UpperBound: []byte{r.prefix + 1}})
		if r.err != nil {
			r.err = fmt.Errorf("open iterator: %w", r.err)
		}
	}
	return r.err
}

// Get returns the value of key (valid until the next call), or
// cpebble.ErrNotFound. The closer is a no-op, to match reader.
func (r *pointReader) Get(key []byte) ([]byte, io.Closer, error) {
	if err := r.open(); err != nil {
		return nil, nil, err
	}
	r.onward = false
	return r.value(r.it.SeekPrefixGE(key) && bytes.Equal(r.it.Key(), key))
}

// getOnward is Get for a key that exists and comes after the one read
// before, if any: when it is the next key, one step reaches it instead of
// a seek. A key that does not exist costs a walk to the next one that
// does, over any deleted keys between, which Get's prefix seek avoids.
func (r *pointReader) getOnward(key []byte) ([]byte, io.Closer, error) {
	if err := r.open(); err != nil {
		return nil, nil, err
	}
	found := false
	if r.onward && r.it.Valid() {
		switch c := bytes.Compare(r.it.Key(), key); {
		case c == 0:
			found = true
		case c < 0:
			found = r.it.Next() && bytes.Equal(r.it.Key(), key)
		}
	}
	r.onward = true
	return r.value(found || r.it.SeekGE(key) && bytes.Equal(r.it.Key(), key))
}

// value returns the value at the iterator when found says it is at the
// key asked for, else the iterator's error or cpebble.ErrNotFound.
func (r *pointReader) value(found bool) ([]byte, io.Closer, error) {
	if !found {
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
	r.onward = false
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

// onwardReader reads through a pointReader's getOnward: for keys that
// exist, read in ascending order, as a claim reads the records and then
// the payloads of the jobs it pops (ids are time-ordered, and claim order
// is FIFO within a priority), which sit side by side; each read after the
// first is then mostly one step of the iterator instead of a seek.
type onwardReader struct{ r *pointReader }

// Get reads key with getOnward.
func (o onwardReader) Get(key []byte) ([]byte, io.Closer, error) { return o.r.getOnward(key) }
