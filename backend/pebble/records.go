package pebble

import (
	"errors"
	"fmt"
	"io"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/kyuhq/kyu/backend"
)

// dirtyEntry is a record whose write is queued or being committed: the
// newest version of the job (nil when it was deleted).
type dirtyEntry struct {
	job        *backend.Job
	hasPayload bool
	ver        uint64
	group      *commitGroup
}

// load returns the current record of a job, or nil when there is none; mu
// must be held. The record may be changed in place and then passed to put.
// A storage error breaks the store.
func (s *Store) load(id jobID) (*backend.Job, bool, error) {
	if e, ok := s.dirty[id]; ok {
		return e.job, e.hasPayload, nil
	}
	if le, ok := s.idx.leases[id]; ok && le.job != nil {
		return le.job, le.hasPayload, nil
	}
	j, hasPayload, err := s.read(&s.records, id)
	if err != nil {
		return nil, false, s.breakStore(err)
	}
	return j, hasPayload, nil
}

// unlock ends a section under mu begun by lockState: it closes the record
// reader, which must not outlive the section (it would miss later
// commits), wakes the committer if it waits for this section, then
// releases mu.
func (s *Store) unlock() {
	if err := s.records.Close(); err != nil {
		_ = s.breakStore(err)
	}
	s.left++
	if s.waitLeft != 0 && s.left >= s.waitLeft {
		s.commitCond.Signal()
	}
	s.mu.Unlock()
}

// reader is a Pebble DB or snapshot.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

// read decodes a job's record from Pebble; nil when there is none.
func (s *Store) read(r reader, id jobID) (*backend.Job, bool, error) {
	v, closer, err := r.Get(jobKey(id))
	if errors.Is(err, cpebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read job %s: %w", id, err)
	}
	defer closer.Close()
	j, hasPayload, err := decodeJob(v)
	if err != nil {
		return nil, false, fmt.Errorf("%w: job %s: %w", ErrCorrupt, id, err)
	}
	j.ID = id.String()
	return j, hasPayload, nil
}

// put queues the write of a job's record and makes it the current one; mu
// must be held.
func (s *Store) put(id jobID, j *backend.Job, hasPayload bool) {
	g := s.group()
	s.buf = encodeJob(s.buf[:0], j, hasPayload)
	var k [17]byte
	k[0] = prefixJob
	copy(k[1:], id[:])
	_ = g.batch.Set(k[:], s.buf, nil)
	s.markDirty(g, id, j, hasPayload)
}

// remove queues the deletion of a job's record and payload; mu must be held.
func (s *Store) remove(id jobID, hasPayload bool) {
	g := s.group()
	_ = g.batch.Delete(jobKey(id), nil)
	if hasPayload {
		_ = g.batch.Delete(payloadKey(id), nil)
	}
	s.markDirty(g, id, nil, false)
}

func (s *Store) markDirty(g *commitGroup, id jobID, j *backend.Job, hasPayload bool) {
	s.ver++
	s.dirty[id] = dirtyEntry{job: j, hasPayload: hasPayload, ver: s.ver, group: g}
	g.dirty = append(g.dirty, dirtyRef{id: id, ver: s.ver})
}

// putUnique queues the write of a unique key; mu must be held.
func (s *Store) putUnique(name string, u uniqueValue) {
	s.idx.uniques[name] = u
	_ = s.group().batch.Set(uniqueKey(name), encodeUnique(u), nil)
}

// dropUnique forgets a unique key; mu must be held.
func (s *Store) dropUnique(name string) {
	delete(s.idx.uniques, name)
	_ = s.group().batch.Delete(uniqueKey(name), nil)
}

// readPayload returns a job's payload from Pebble; nil when it has none.
func (s *Store) readPayload(r reader, id jobID) ([]byte, error) {
	v, closer, err := r.Get(payloadKey(id))
	if errors.Is(err, cpebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kyu/pebble: read payload of %s: %w", id, err)
	}
	p := append([]byte{}, v...)
	_ = closer.Close()
	return p, nil
}
