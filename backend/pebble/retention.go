package pebble

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/kyuhq/kyu/backend"
)

// The retention index orders the final jobs that retention will delete by
// the time it deletes them. It lives in Pebble, not in memory: a drain of
// a million jobs kept for a day so leaves no million entries on the Go
// heap (a heap of them took 24 MB, and the runtime kept about as much
// again for a heap that size), and a reopen need not rebuild it.
//
// A group commit writes one key per deletion time among the jobs it made
// final, retentionKey(at, seq) with seq the group's number, whose value is
// their ids (16 bytes each): a drain's completions share their deletion
// time, and one key for a group's fifty costs Pebble far less than fifty
// keys would. Keys are not updated when a job is deleted or retried
// before its time: ApplyRetention walks the keys in time order up to Now
// (sweepRetention) and checks each id against the job's current record,
// deleting only a final job whose ExpiresAt is still the key's time.
//
// Stores of format 4 and older have no retention keys: the first open by
// this code writes them while it scans the records (retentionMigration),
// then the key prefixRetentionBuilt, which later opens look for.

// retentionKeyLen is the length of a retention key: prefix, time, tag.
const retentionKeyLen = 1 + 8 + 8

// retentionKey is the key of a list of jobs that retention deletes at the
// time code at; tag tells apart the lists of one time (a group's number,
// or a number of the migration's, at or above migrationTag). The time is
// stored with its sign bit flipped, big endian, so that keys sort in time
// order, negative times first.
func retentionKey(at int64, tag uint64) []byte {
	k := make([]byte, 0, retentionKeyLen)
	k = append(k, prefixRetention)
	k = binary.BigEndian.AppendUint64(k, uint64(at)^(1<<63))
	return binary.BigEndian.AppendUint64(k, tag)
}

// migrationTag is the least tag of the keys the migration writes; group
// numbers stay below it.
const migrationTag = 1 << 63

// parseRetentionKey reads the time of a key retentionKey wrote.
func parseRetentionKey(k []byte) (at int64, ok bool) {
	if len(k) != retentionKeyLen || k[0] != prefixRetention {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(k[1:9]) ^ (1 << 63)), true
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

// retentionList is the ids of the jobs, in the order they were added,
// that retention deletes at one time.
type retentionList struct {
	at  int64
	ids []byte
}

// retentionLists collects ids by deletion time.
type retentionLists []retentionList

// add appends id to the list of at.
func (ls *retentionLists) add(at int64, id jobID) {
	for i := len(*ls) - 1; i >= 0; i-- {
		if l := &(*ls)[i]; l.at == at {
			l.ids = append(l.ids, id[:]...)
			return
		}
	}
	*ls = append(*ls, retentionList{at: at, ids: append(make([]byte, 0, 16*16), id[:]...)})
}

// write sets one key per list in b, tagged tag, tag+1… in time order,
// and returns the next tag.
func (ls retentionLists) write(b *cpebble.Batch, tag uint64) uint64 {
	slices.SortFunc(ls, func(a, b retentionList) int { return cmp.Compare(a.at, b.at) })
	for _, l := range ls {
		_ = b.Set(retentionKey(l.at, tag), l.ids, nil)
		tag++
	}
	return tag
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

// putRetention adds a final job to the current group's retention lists,
// if retention ever deletes it; mu must be held.
func (s *store) putRetention(id jobID, j *backend.Job) {
	at, ok := retentionAt(j)
	if !ok {
		return
	}
	g := s.group()
	g.retention.add(at, id)
	if !g.hasRetention || at < g.retentionMin {
		g.hasRetention, g.retentionMin = true, at
	}
	s.sweep.from = min(s.sweep.from, at)
}

// writeRetention adds the group's retention keys to its batch, after its
// other writes: Pebble inserts a batch's keys into its memtable one by
// one, each search starting where the last insert landed, so keys side
// by side cost less together. The committer calls it once it has
// numbered the group.
func (g *commitGroup) writeRetention() {
	if len(g.retention) > 0 {
		g.retention.write(g.batch, g.seq)
		g.retention = nil
	}
}

// sweepRetention deletes, at most limit, the final jobs whose retention
// ends at or before the time code now, in time order, and returns how many
// it deleted; mu must be held. It reads the index as committed: a key
// whose write is still in flight is swept by a later call (from stays at
// or before it). A list it stops in is written back with the ids it has
// not reached.
func (s *store) sweepRetention(now int64, limit int) (int, error) {
	it, err := s.db.NewIter(&cpebble.IterOptions{
		LowerBound: retentionKey(s.sweep.from, 0),
		UpperBound: []byte{prefixRetention + 1},
	})
	if err != nil {
		return 0, s.breakStore(fmt.Errorf("retention index: %w", err))
	}
	moved, last := 0, s.sweep.from
	fail := func(err error) (int, error) {
		_ = it.Close()
		return moved, s.breakStore(err)
	}
	for ok := it.First(); ok && moved < limit; ok = it.Next() {
		at, valid := parseRetentionKey(it.Key())
		if !valid {
			return fail(fmt.Errorf("%w: %s: bad retention key %x", ErrCorrupt, s.dir, it.Key()))
		}
		if at > now {
			break
		}
		last = at
		ids, err := it.ValueAndErr()
		if err != nil {
			return fail(fmt.Errorf("retention index: %w", err))
		}
		if len(ids)%16 != 0 {
			return fail(fmt.Errorf("%w: %s: bad retention list of %d bytes", ErrCorrupt, s.dir, len(ids)))
		}
		n := 0
		for ; n < len(ids) && moved < limit; n += 16 {
			id := jobID(ids[n : n+16])
			j, sd, err := s.load(id)
			if err != nil {
				_ = it.Close()
				return moved, err
			}
			if j == nil {
				continue // deleted since
			}
			if cur, ok := retentionAt(j); !ok || cur != at {
				continue // retried since, or finished again
			}
			s.deleteJob(id, j, sd, j.State)
			moved++
		}
		key := append([]byte(nil), it.Key()...)
		if n < len(ids) {
			_ = s.group().batch.Set(key, ids[n:], nil)
		} else {
			_ = s.group().batch.Delete(key, nil)
		}
	}
	if err := it.Close(); err != nil {
		return moved, s.breakStore(fmt.Errorf("retention index: %w", err))
	}
	// Keys in groups not yet committed were invisible to the iterator.
	for _, g := range []*commitGroup{s.pending, s.committing} {
		if g != nil && g.hasRetention {
			last = min(last, g.retentionMin)
		}
	}
	s.sweep.from = last
	return moved, nil
}

// retentionMigration writes the retention keys of a store that has none
// yet (format 4 and older) while rebuild scans its records.
type retentionMigration struct {
	db    *cpebble.DB
	lists retentionLists
	n     int
	tag   uint64
}

// retentionMigrationBatch is how many jobs the migration lists per batch.
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
	return &retentionMigration{db: s.db, tag: migrationTag}, nil
}

// add lists a final job the scan found.
func (m *retentionMigration) add(id jobID, j *backend.Job) error {
	at, ok := retentionAt(j)
	if !ok {
		return nil
	}
	m.lists.add(at, id)
	if m.n++; m.n < retentionMigrationBatch {
		return nil
	}
	return m.flush(cpebble.NoSync, false)
}

// flush writes the lists so far, and with done the prefixRetentionBuilt
// key.
func (m *retentionMigration) flush(opts *cpebble.WriteOptions, done bool) error {
	b := m.db.NewBatch()
	m.tag = m.lists.write(b, m.tag)
	m.lists, m.n = nil, 0
	if done {
		_ = b.Set([]byte{prefixRetentionBuilt}, nil, nil)
	}
	err := b.Commit(opts)
	_ = b.Close()
	return err
}

// finish writes the last lists and the prefixRetentionBuilt key, durably:
// an open that crashes before it writes them all again (the same keys, as
// the scan reads the records in the same order).
func (m *retentionMigration) finish() error { return m.flush(cpebble.Sync, true) }

// abandon drops the lists not yet written, after a failed scan.
func (m *retentionMigration) abandon() { m.lists = nil }
