package pebble

import (
	"errors"
	"fmt"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/kyuhq/kyu/backend"
)

// A job's JID (backend.NewJob.JID) is held by a key of its own, 'i' + jid,
// whose value is the holder's id. The key is written in the same group as
// the record of the job that takes the JID and deleted in the same group
// as the record, so it exists exactly while its job does. The keys are
// not kept in memory (a store of a million jobs with JIDs would hold a
// million strings); only those whose writes are in flight are, in
// store.jids, since Pebble does not see them until their group commits.

// jidEntry is a JID key whose write is queued or being committed.
type jidEntry struct {
	// id is the holder; when held is false, the key is being deleted and
	// id is the job that held it.
	id    jobID
	held  bool
	ver   uint64
	group *commitGroup
}

// jidRef names the entry of store.jids a group wrote, to clear after
// commit.
type jidRef struct {
	jid string
	ver uint64
}

// putJID queues the write of the JID key naming id; mu must be held.
func (s *store) putJID(jid string, id jobID) {
	g := s.group()
	_ = g.batch.Set(jidKey(jid), id[:], nil)
	s.markJID(g, jid, id, true)
}

// dropJID queues the deletion of the JID key held by id; mu must be held.
func (s *store) dropJID(jid string, id jobID) {
	g := s.group()
	_ = g.batch.Delete(jidKey(jid), nil)
	s.markJID(g, jid, id, false)
}

func (s *store) markJID(g *commitGroup, jid string, id jobID, held bool) {
	s.ver++
	s.jids[jid] = jidEntry{id: id, held: held, ver: s.ver, group: g}
	g.jids = append(g.jids, jidRef{jid: jid, ver: s.ver})
}

// jidKeyHolder returns the id the JID key names, from the writes in flight
// or else from Pebble: held is false when there is no key. When the key's
// deletion is in flight, id is the job that held it (held false). mu must
// be held. A storage error breaks the store.
func (s *store) jidKeyHolder(jid string) (id jobID, held bool, err error) {
	if e, ok := s.jids[jid]; ok {
		return e.id, e.held, nil
	}
	v, closer, err := s.db.Get(jidKey(jid))
	if errors.Is(err, cpebble.ErrNotFound) {
		return jobID{}, false, nil
	}
	if err != nil {
		return jobID{}, false, s.breakStore(fmt.Errorf("read the key of jid %q: %w", jid, err))
	}
	defer closer.Close()
	if len(v) != len(id) {
		return jobID{}, false, s.breakStore(fmt.Errorf("%w: the key of jid %q holds %d bytes, not an id", ErrCorrupt, jid, len(v)))
	}
	return jobID(v), true, nil
}

// jidHolder returns the job holding a JID and its current record, or a
// nil record when the JID is free; mu must be held. A key naming a job
// that is gone or carries another JID, which only damage could leave,
// holds nothing.
func (s *store) jidHolder(jid string) (jobID, *backend.Job, error) {
	id, held, err := s.jidKeyHolder(jid)
	if err != nil || !held {
		return jobID{}, nil, err
	}
	j, _, err := s.load(id)
	if err != nil || j == nil || j.JID != jid {
		return jobID{}, nil, err
	}
	return id, j, nil
}

// checkJIDs compares the number of JID keys with the number of job
// records that carry a JID (counted by rebuild) and, should they differ,
// which only damage or a hand-edited store can cause, writes the keys
// afresh from the records (the older job keeps a JID two records carry).
// It runs at open, before any operation.
func (s *store) checkJIDs(records int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s: reading the data files failed: %v", ErrCorrupt, s.dir, r)
		}
	}()
	keys := 0
	if err := s.scan(prefixJID, func(k, v []byte) error { keys++; return nil }); err != nil {
		return err
	}
	if keys == records {
		return nil
	}
	s.log.Warn("the JID keys disagree with the job records; writing them afresh", "jid_keys", keys, "jobs_with_jid", records)
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.DeleteRange([]byte{prefixJID}, []byte{prefixJID + 1}, nil)
	seen := make(map[string]jobID, records)
	err = s.scan(prefixJob, func(k, v []byte) error {
		j, _, err := decodeJob(v)
		if err != nil || j.JID == "" {
			return err
		}
		id := jobID(k[1:])
		if h, ok := seen[j.JID]; ok {
			s.log.Warn("two jobs carry one JID; the older keeps it", "jid", j.JID, "holder", h, "job", id)
			return nil
		}
		seen[j.JID] = id
		return b.Set(jidKey(j.JID), id[:], nil)
	})
	if err != nil {
		return err
	}
	if err := s.db.Apply(b, cpebble.Sync); err != nil {
		return fmt.Errorf("kyu/pebble: %s: write the JID keys: %w", s.dir, err)
	}
	return nil
}
