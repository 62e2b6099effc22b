package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/kyuhq/kyu/backend"
)

// The retention index orders the final jobs that retention will delete by
// the time it deletes them. It lives in Pebble, not in memory: a final
// job has the key retentionKey(at, id), where at is the timeCode of its
// ExpiresAt, written in the same batch as the record that sets ExpiresAt
// and deleted in the batch that deletes the job or takes it out of its
// final state. A drain of a million jobs kept for a day so leaves no
// million entries on the Go heap (a heap of them took 24 MB, and the
// runtime keeps about as much again for a heap that size), and a reopen
// need not rebuild it.
//
// ApplyRetention walks the keys in time order up to Now (sweepRetention)
// and checks each against the job's current record, so a key that missed
// its deletion is dropped harmlessly when its time comes.
//
// Stores of format 3 and older have no retention keys: the first open by
// this code writes them while it scans the records (retentionMigration),
// then the key prefixRetentionBuilt, which later opens look for.

// retentionKeyLen is the length of a retention key: prefix, time, id.
const retentionKeyLen = 1 + 8 + 16

// retentionKey is the key of job id in the retention index, to be deleted
// at the time code at. The time is stored with its sign bit flipped, big
// endian, so that keys sort in time order, negative times first.
func retentionKey(at int64, id jobID) []byte {
	k := make([]byte, 0, retentionKeyLen)
	k = append(k, prefixRetention)
	k = binary.BigEndian.AppendUint64(k, uint64(at)^(1<<63))
	return append(k, id[:]...)
}

// parseRetentionKey reads a key retentionKey wrote.
func parseRetentionKey(k []byte) (at int64, id jobID, ok bool) {
	if len(k) != retentionKeyLen || k[0] != prefixRetention {
		return 0, jobID{}, false
	}
	at = int64(binary.BigEndian.Uint64(k[1:9]) ^ (1 << 63))
	copy(id[:], k[9:])
	return at, id, true
}

// retentionAt is the time code at which retention deletes a final job,
// from its ExpiresAt; ok is false when it never does. Expiry never sets a
// time past the range of times (its timeCode would overflow), nor does a
// version 1 record decode to one.
func retentionAt(j *backend.Job) (at int64, ok bool) {
	if t := j.ExpiresAt; j.State.Final() && !t.IsZero() && backend.InTimeRange(t) {
		return timeCode(t), true
	}
	return 0, false
}

// retentionSweep is what the store remembers of the retention index
// between sweeps; under mu.
type retentionSweep struct {
	// from is the time code where the next sweep starts: every key
	// before it that is committed has been swept. Without it each sweep
	// would walk again over the deletions (tombstones) of the sweeps
	// before it, until Pebble compacts them away. A key written before
	// it (a short retention, or a Now that went back) moves it back.
	from int64
}

func newRetentionSweep() retentionSweep { return retentionSweep{from: math.MinInt64} }

// putRetention queues the write of a final job's retention key, if
// retention ever deletes it; mu must be held.
func (s *store) putRetention(id jobID, j *backend.Job) {
	at, ok := retentionAt(j)
	if !ok {
		return
	}
	g := s.group()
	g.queueRetention(at, id, false)
	if !g.retention || at < g.retentionMin {
		g.retention, g.retentionMin = true, at
	}
	s.sweep.from = min(s.sweep.from, at)
}

// dropRetention queues the deletion of the retention key that j, a final
// job's current record, was written with; mu must be held.
func (s *store) dropRetention(id jobID, j *backend.Job) {
	if at, ok := retentionAt(j); ok {
		s.group().queueRetention(at, id, true)
	}
}

// retentionOp is a write to the retention index: the key's Set, or its
// Delete.
type retentionOp struct {
	key [retentionKeyLen]byte
	del bool
}

// queueRetention queues a write to the retention index in the group; mu
// must be held. The writes go into the batch after all the others
// (writeRetention): Pebble inserts a batch's keys into its memtable one
// by one, and each insert starts from where the last one landed, so a
// drain's records, which sit side by side, and their retention keys,
// which sit side by side elsewhere, cost each a search from the top when
// they alternate (about 1,400 more instructions a job under callgrind
// than in two runs).
func (g *commitGroup) queueRetention(at int64, id jobID, del bool) {
	op := retentionOp{del: del}
	op.key[0] = prefixRetention
	binary.BigEndian.PutUint64(op.key[1:9], uint64(at)^(1<<63))
	copy(op.key[9:], id[:])
	g.retentionOps = append(g.retentionOps, op)
}

// writeRetention adds the group's retention index writes to its batch, in
// the order they were queued; the committer calls it when it takes the
// group.
func (g *commitGroup) writeRetention() {
	for i := range g.retentionOps {
		op := &g.retentionOps[i]
		if op.del {
			_ = g.batch.Delete(op.key[:], nil)
		} else {
			_ = g.batch.Set(op.key[:], nil, nil)
		}
	}
	g.retentionOps = nil
}

// sweepRetention deletes, at most limit, the final jobs whose retention
// ends at or before the time code now, in time order, and returns how many
// it deleted; mu must be held. It reads the index as committed: a key
// whose write is still in flight is swept by a later call (from stays at
// or before it).
func (s *store) sweepRetention(now int64, limit int) (int, error) {
	it, err := s.db.NewIter(&cpebble.IterOptions{
		LowerBound: retentionKey(s.sweep.from, jobID{}),
		UpperBound: []byte{prefixRetention + 1},
	})
	if err != nil {
		return 0, s.breakStore(fmt.Errorf("retention index: %w", err))
	}
	moved, last := 0, s.sweep.from
	for ok := it.First(); ok && moved < limit; ok = it.Next() {
		at, id, valid := parseRetentionKey(it.Key())
		if !valid {
			_ = it.Close()
			return moved, s.breakStore(fmt.Errorf("%w: %s: bad retention key %x", ErrCorrupt, s.dir, it.Key()))
		}
		if at > now {
			break
		}
		last = at
		j, sd, err := s.load(id)
		if err != nil {
			_ = it.Close()
			return moved, err
		}
		if j == nil || !j.State.Final() {
			// Deleted or retried since, or a key left behind.
			s.group().queueRetention(at, id, true)
			continue
		}
		if cur, ok := retentionAt(j); !ok || cur != at {
			s.group().queueRetention(at, id, true)
			continue
		}
		s.deleteJob(id, j, sd, j.State)
		moved++
	}
	if err := it.Close(); err != nil {
		return moved, s.breakStore(fmt.Errorf("retention index: %w", err))
	}
	// Keys in groups not yet committed were invisible to the iterator.
	for _, g := range []*commitGroup{s.pending, s.committing} {
		if g != nil && g.retention {
			last = min(last, g.retentionMin)
		}
	}
	s.sweep.from = last
	return moved, nil
}

// retentionMigration writes the retention keys of a store that has none
// yet (format 3 and older) while rebuild scans its records.
type retentionMigration struct {
	db    *cpebble.DB
	batch *cpebble.Batch
}

// retentionMigrationBatch is how many keys the migration writes per batch.
const retentionMigrationBatch = 4096

// startRetentionMigration returns a migration when the store's retention
// index is not known complete (no prefixRetentionBuilt key), else nil.
func (s *store) startRetentionMigration() (*retentionMigration, error) {
	_, closer, err := s.db.Get([]byte{prefixRetentionBuilt})
	switch {
	case err == nil:
		_ = closer.Close()
		return nil, nil
	case !errors.Is(err, cpebble.ErrNotFound):
		return nil, fmt.Errorf("read the retention index flag: %w", err)
	}
	return &retentionMigration{db: s.db, batch: s.db.NewBatch()}, nil
}

// add writes the retention key of a final job the scan found.
func (m *retentionMigration) add(id jobID, j *backend.Job) error {
	at, ok := retentionAt(j)
	if !ok {
		return nil
	}
	_ = m.batch.Set(retentionKey(at, id), nil, nil)
	if m.batch.Count() < retentionMigrationBatch {
		return nil
	}
	err := m.batch.Commit(cpebble.NoSync)
	_ = m.batch.Close()
	m.batch = m.db.NewBatch()
	return err
}

// finish writes the last keys and the prefixRetentionBuilt key, durably:
// an open that crashes before it writes them all again.
func (m *retentionMigration) finish() error {
	_ = m.batch.Set([]byte{prefixRetentionBuilt}, nil, nil)
	err := m.batch.Commit(cpebble.Sync)
	_ = m.batch.Close()
	return err
}

// abandon drops the keys not yet written, after a failed scan.
func (m *retentionMigration) abandon() { _ = m.batch.Close() }
