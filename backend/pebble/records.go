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
	job   *backend.Job
	sd    side
	ver   uint64
	group *commitGroup
}

// load returns the current record of a job, or nil when there is none; mu
// must be held. The record may be changed in place and then passed to put.
// A storage error breaks the store.
func (s *store) load(id jobID) (*backend.Job, side, error) {
	return s.loadVia(&s.records, id)
}

// loadPending is load for a claim's reads of the pending jobs it pops,
// whose records exist and are read in ascending order (onwardReader).
// A record it reads from Pebble is decoded into the first job of a
// jobPair, and spare is the second, for the copy the claim hands out
// (Job.CloneInto); for a job in memory spare is a Job of its own.
func (s *store) loadPending(id jobID) (j, spare *backend.Job, sd side, err error) {
	if j, sd, ok := s.loadMemory(id); ok {
		return j, new(backend.Job), sd, nil
	}
	if j, spare, sd, ok := s.takePrefetched(id); ok {
		return j, spare, sd, nil
	}
	s.claimReads++
	p := new(jobPair)
	found, sd, err := s.readKeyInto(&p[0], onwardReader{&s.records}, s.records.idKey(id), id, &s.names)
	if err != nil {
		return nil, nil, side{}, s.breakStore(err)
	}
	if !found {
		return nil, nil, side{}, nil
	}
	return &p[0], &p[1], sd, nil
}

// jobPair is the two copies of a job that a claim reading its record
// makes, the store's and the one it hands out, in one allocation instead
// of two.
type jobPair [2]backend.Job

// loadMemory returns the record of a job whose current version is in
// memory: written and not yet committed, or active; ok is false for the
// others. mu must be held.
func (s *store) loadMemory(id jobID) (*backend.Job, side, bool) {
	if e, ok := s.dirty[id]; ok {
		return e.job, e.sd, true
	}
	if le, ok := s.idx.leases[id]; ok && le.job != nil {
		return le.job, le.sd, true
	}
	return nil, side{}, false
}

// loadVia is load reading Pebble through r, which reads through
// s.records.
func (s *store) loadVia(r reader, id jobID) (*backend.Job, side, error) {
	if j, sd, ok := s.loadMemory(id); ok {
		return j, sd, nil
	}
	j, sd, err := s.readKey(r, s.records.idKey(id), id, &s.names)
	if err != nil {
		return nil, side{}, s.breakStore(err)
	}
	return j, sd, nil
}

// unlock ends a section under mu begun by lockState: it fills the claims
// waiting for the jobs the section made pending (waitclaim.go), closes the
// record reader, which must not outlive the section (it would miss later
// commits), wakes the committer if the section started a group or the
// committer waits for it, then releases mu.
func (s *store) unlock() {
	s.endSection()
	s.mu.Unlock()
}

// endSection is unlock but for the release of mu.
func (s *store) endSection() {
	if s.waiting.due != nil {
		s.fillWaiting()
	}
	if len(s.held) > 0 {
		s.writeHeld()
	}
	if len(s.waiting.payloads) > 0 {
		clear(s.waiting.payloads)
	}
	if err := s.records.Close(); err != nil {
		_ = s.breakStore(err)
	}
	if s.writes != s.sectionWrites && s.pending != nil {
		s.pending.sections++
	}
	s.left++
	if s.callCommitter || s.waitLeft != 0 && s.left >= s.waitLeft {
		s.callCommitter = false
		s.commitCond.Signal()
	}
}

// reader is a Pebble DB or snapshot.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

// read decodes a job's record from Pebble; nil when there is none.
func (s *store) read(r reader, id jobID) (*backend.Job, side, error) {
	return s.readKey(r, jobKey(id), id, nil)
}

// readKey is read with the job's key given, decoding names through
// names (which may be nil).
func (s *store) readKey(r reader, key []byte, id jobID, names *nameCache) (*backend.Job, side, error) {
	j := &backend.Job{}
	found, sd, err := s.readKeyInto(j, r, key, id, names)
	if !found || err != nil {
		return nil, side{}, err
	}
	return j, sd, nil
}

// readKeyInto is readKey decoding into j, a zero Job; found is false
// when there is no record.
func (s *store) readKeyInto(j *backend.Job, r reader, key []byte, id jobID, names *nameCache) (found bool, sd side, err error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, cpebble.ErrNotFound) {
		return false, side{}, nil
	}
	if err != nil {
		return false, side{}, fmt.Errorf("read job %s: %w", id, err)
	}
	defer closer.Close()
	sd, err = decodeJobInto(j, v, names)
	if err != nil {
		return false, side{}, fmt.Errorf("%w: job %s: %w", ErrCorrupt, id, err)
	}
	j.ID = id.String()
	return true, sd, nil
}

// put queues the write of a job's record and makes it the current one; mu
// must be held.
//
// The record of a job made pending while claims wait is held back until
// the section ends (writeHeld): a waiting claim filled in the section
// (fillWaiting) may take the job, and its active record then replaces
// the pending one, which is not written at all, rather than written and
// overwritten in the same batch.
func (s *store) put(id jobID, j *backend.Job, sd side) {
	g := s.group()
	s.markDirty(g, id, j, sd)
	if j.State == backend.StatePending && len(s.waiting.list) > 0 {
		s.held = append(s.held, dirtyRef{id: id, ver: s.ver})
		return
	}
	s.writeRecord(g, id, j, sd)
}

// writeRecord adds the write of a job's record to g's batch.
func (s *store) writeRecord(g *commitGroup, id jobID, j *backend.Job, sd side) {
	s.buf = encodeJob(s.buf[:0], j, sd)
	var k [17]byte
	k[0] = prefixJob
	copy(k[1:], id[:])
	_ = g.batch.Set(k[:], s.buf, nil)
}

// writeHeld writes the records put held back (see put) that are still
// the current ones: the others were written again or deleted since,
// which their batch holds. It runs when the section ends, and before the
// pending group is taken, in case that happens first. mu must be held.
func (s *store) writeHeld() {
	for _, h := range s.held {
		if e, ok := s.dirty[h.id]; ok && e.ver == h.ver {
			s.writeRecord(e.group, h.id, e.job, e.sd)
		}
	}
	if cap(s.held) > maxSpareDirty {
		s.held = nil // a large import's: not kept
	} else {
		s.held = s.held[:0]
	}
}

// logPointDeletes is the most log lines a deletion removes one key at a
// time; more are removed with a range deletion.
const logPointDeletes = 16

// remove queues the deletion of a job's record, payload and log lines; mu
// must be held.
func (s *store) remove(id jobID, sd side) {
	g := s.group()
	_ = g.batch.Delete(jobKey(id), nil)
	if sd.payload {
		_ = g.batch.Delete(payloadKey(id), nil)
	}
	if sd.logs > logPointDeletes {
		// One range tombstone rather than up to the cap's worth of
		// deletions, so a Purge of many chatty jobs stays a small batch.
		_ = g.batch.DeleteRange(logPrefix(id), logKey(id, sd.logs), nil)
	} else {
		for n := range sd.logs {
			_ = g.batch.Delete(logKey(id, n), nil)
		}
	}
	s.markDirty(g, id, nil, side{})
}

func (s *store) markDirty(g *commitGroup, id jobID, j *backend.Job, sd side) {
	s.dropPrefetched(id)
	s.ver++
	s.dirty[id] = dirtyEntry{job: j, sd: sd, ver: s.ver, group: g}
	g.dirty = append(g.dirty, dirtyRef{id: id, ver: s.ver})
}

// putUnique queues the write of a unique key; mu must be held.
func (s *store) putUnique(name string, u uniqueValue) {
	s.idx.uniques[name] = u
	_ = s.group().batch.Set(uniqueKey(name), encodeUnique(u), nil)
}

// dropUnique forgets a unique key; mu must be held.
func (s *store) dropUnique(name string) {
	delete(s.idx.uniques, name)
	_ = s.group().batch.Delete(uniqueKey(name), nil)
}

// readPayload returns a job's payload from Pebble; nil when it has none.
func (s *store) readPayload(r reader, id jobID) ([]byte, error) {
	return s.readPayloadKey(r, payloadKey(id), id)
}

// readPayloadKey is readPayload with the payload's key given.
func (s *store) readPayloadKey(r reader, key []byte, id jobID) ([]byte, error) {
	v, closer, err := r.Get(key)
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

// side says what a job keeps under keys of its own beside its record.
type side struct {
	// payload: the payload key exists.
	payload bool
	// payloadLen is the payload's length when known in memory (from the
	// enqueue, until the record is read back from Pebble); 0 when unknown.
	// It is not stored: the payload key has the length.
	payloadLen int
	// logs is the number of log lines held, under logKey(id, 0..logs-1).
	logs int
}
