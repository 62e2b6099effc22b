package pebble

import (
	"encoding/binary"
	"fmt"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/kyuhq/kyu/backend"
)

// rebuild fills the in-memory indexes with one scan of the unique keys and
// one of the job records. A record that does not decode fails the open with
// ErrCorrupt; so does a panic from the engine on damaged files. The JID
// keys are not kept in memory; rebuild counts the records that carry a
// JID, for checkJIDs. The retention index is not either: rebuild writes
// it only for a store that lacks it (retentionMigration).
func (s *store) rebuild() (jidRecords int, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s: reading the data files failed: %v", ErrCorrupt, s.dir, r)
		}
	}()
	x := s.idx

	err = s.scan(prefixUnique, func(k, v []byte) error {
		u, err := decodeUnique(v)
		if err != nil {
			return err
		}
		name := string(k[1:])
		x.uniques[name] = u
		if u.until != 0 {
			x.uniqueExpiry.push(uniqueExpiry{until: u.until, name: name})
		}
		return nil
	})
	if err != nil {
		return 0, err
	}

	mig, err := s.startRetentionMigration()
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrCorrupt, s.dir, err)
	}
	counts := make(map[backend.State]int)
	err = s.scan(prefixJob, func(k, v []byte) error {
		if len(k) != 17 {
			return fmt.Errorf("%w: bad job key %x", errCorruptRecord, k)
		}
		id := jobID(k[1:])
		j, _, err := decodeJob(v)
		if err != nil {
			return fmt.Errorf("job %s: %w", id, err)
		}
		counts[j.State]++
		if j.JID != "" {
			jidRecords++
		}
		x.index(id, j)
		x.track(j.Queue, id, "", j.State)
		x.watchDeadline(id, j)
		if mig != nil {
			if err := mig.add(id, j); err != nil {
				return fmt.Errorf("write the retention index: %w", err)
			}
		}
		if j.UniqueKey != "" {
			name := uniqueName(j.Queue, j.UniqueKey)
			if u, ok := x.uniques[name]; ok && u.holder == id {
				u.state = j.State
				x.uniques[name] = u
			}
		}
		return nil
	})
	if mig != nil {
		if err != nil {
			mig.abandon()
		} else if err = mig.finish(); err != nil {
			err = fmt.Errorf("kyu/pebble: %s: write the retention index: %w", s.dir, err)
		} else {
			s.log.Info("retention index written", "final_jobs", counts[backend.StateCompleted]+counts[backend.StateFailed]+counts[backend.StateCancelled])
		}
	}
	if err != nil {
		return 0, err
	}
	if err := s.rebuildSettings(); err != nil {
		return 0, err
	}
	args := []any{"unique_keys", len(x.uniques), "jids", jidRecords, "workers", len(s.workers)}
	for _, st := range backend.States() {
		args = append(args, string(st), counts[st])
	}
	s.log.Info("store opened", args...)
	return jidRecords, nil
}

// scan calls fn for every key with the given prefix, in key order.
func (s *store) scan(prefix byte, fn func(k, v []byte) error) error {
	it, err := s.db.NewIter(&cpebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, s.dir, err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err == nil {
			err = fn(it.Key(), v)
		}
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("%w: %s: %w", ErrCorrupt, s.dir, err)
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, s.dir, err)
	}
	return nil
}

// rebuildSettings loads the queue settings, the counters and the worker
// registry.
func (s *store) rebuildSettings() error {
	err := s.scan(prefixSettings, func(k, v []byte) error {
		st, err := decodeSettings(v)
		if err != nil {
			return fmt.Errorf("queue %q: %w", k[1:], err)
		}
		qi := s.idx.queue(string(k[1:]))
		qi.settings, qi.hasSettings = st, true
		return nil
	})
	if err != nil {
		return err
	}
	err = s.scan(prefixMinute, func(k, v []byte) error {
		if len(k) != 9 {
			return fmt.Errorf("%w: bad counter key %x", errCorruptRecord, k)
		}
		p, f, err := decodeCounts(v)
		if err != nil {
			return err
		}
		s.counters.minutes[int64(binary.BigEndian.Uint64(k[1:]))] = &minuteCount{processed: p, failed: f}
		return nil
	})
	if err != nil {
		return err
	}
	err = s.scan(prefixQueueMin, func(k, v []byte) error {
		if len(k) < 10 {
			return fmt.Errorf("%w: bad queue counter key %x", errCorruptRecord, k)
		}
		p, f, err := decodeCounts(v)
		if err != nil {
			return err
		}
		qm := queueMinute{queue: string(k[9:]), minute: int64(binary.BigEndian.Uint64(k[1:9]))}
		s.counters.queues[qm] = &minuteCount{processed: p, failed: f}
		return nil
	})
	if err != nil {
		return err
	}
	err = s.scan(prefixTotals, func(k, v []byte) error {
		p, f, err := decodeCounts(v)
		s.counters.processed, s.counters.failed = p, f
		return err
	})
	if err != nil {
		return err
	}
	return s.scan(prefixWorker, func(k, v []byte) error {
		w, err := decodeWorker(v)
		if err != nil {
			return err
		}
		s.workers[string(k[1:])] = w
		return nil
	})
}
