package pebble

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// counters are the processed/failed counts per minute and in total, kept
// in memory under mu and persisted by the committer: each group writes the
// current value of the minutes it touched and the totals, once per group
// whatever the number of attempts it ended (writeCounters).
type counters struct {
	// minutes maps the start of a minute (Unix seconds) to its counts.
	minutes           map[int64]*minuteCount
	processed, failed int64
	// last is the entry of lastMinute, the minute counted last: most
	// attempts end in the same minute as the one before.
	last       *minuteCount
	lastMinute int64
	// queues maps a queue's minute to its counts (backend.QueueInfo's
	// windows), kept backend.QueueStatsHistory.
	queues map[queueMinute]*minuteCount
}

// queueMinute names the counters of one queue in one minute (Unix
// seconds).
type queueMinute struct {
	queue  string
	minute int64
}

type minuteCount struct {
	processed, failed int64
}

func newCounters() counters {
	return counters{minutes: make(map[int64]*minuteCount), queues: make(map[queueMinute]*minuteCount)}
}

// countAttempt counts an attempt of a job in queue that ended at now,
// failed or not (see backend.MinuteCount); mu must be held.
func (s *store) countAttempt(queue string, now time.Time, failed bool) {
	// backend.MinuteOf, for the times CheckNow allows (from 1970 on).
	u := now.Unix()
	m := u - u%60
	c := s.counters.last
	if c == nil || s.counters.lastMinute != m {
		if c = s.counters.minutes[m]; c == nil {
			c = &minuteCount{}
			s.counters.minutes[m] = c
		}
		s.counters.last, s.counters.lastMinute = c, m
	}
	qm := queueMinute{queue, m}
	qc := s.counters.queues[qm]
	if qc == nil {
		qc = &minuteCount{}
		s.counters.queues[qm] = qc
	}
	c.processed++
	qc.processed++
	s.counters.processed++
	if failed {
		c.failed++
		qc.failed++
		s.counters.failed++
	}
	g := s.group()
	if !slices.Contains(g.minutes, m) {
		g.minutes = append(g.minutes, m)
	}
	if !slices.Contains(g.queueMinutes, qm) {
		g.queueMinutes = append(g.queueMinutes, qm)
	}
}

// writeCounters adds to g's batch the counters its operations changed;
// mu must be held, and g taken from pending (nothing else writes to it).
func (s *store) writeCounters(g *commitGroup) {
	for _, qm := range g.queueMinutes {
		if c := s.counters.queues[qm]; c != nil {
			_ = g.batch.Set(queueMinuteKey(qm), encodeCounts(c.processed, c.failed), nil)
		} else {
			_ = g.batch.Delete(queueMinuteKey(qm), nil)
		}
	}
	if len(g.minutes) == 0 {
		return
	}
	for _, m := range g.minutes {
		if c := s.counters.minutes[m]; c != nil {
			_ = g.batch.Set(minuteKey(m), encodeCounts(c.processed, c.failed), nil)
		} else {
			_ = g.batch.Delete(minuteKey(m), nil)
		}
	}
	_ = g.batch.Set([]byte{prefixTotals}, encodeCounts(s.counters.processed, s.counters.failed), nil)
}

// dropMinutes forgets the counters of minutes that no Stats call at now
// can show any more (older than backend.StatsHistory, and
// backend.QueueStatsHistory for a queue's), at most limit of each; mu
// must be held.
func (s *store) dropMinutes(now time.Time, limit int) {
	oldestQueue := backend.MinuteOf(now).Add(-backend.QueueStatsHistory + time.Minute).Unix()
	n := 0
	for qm := range s.counters.queues {
		if n >= limit {
			break
		}
		if qm.minute < oldestQueue {
			delete(s.counters.queues, qm)
			g := s.group()
			g.queueMinutes = append(g.queueMinutes, qm)
			n++
		}
	}
	oldest := backend.MinuteOf(now).Add(-backend.StatsHistory + time.Minute).Unix()
	n = 0
	for m := range s.counters.minutes {
		if n >= limit {
			return
		}
		if m < oldest {
			delete(s.counters.minutes, m)
			if s.counters.lastMinute == m {
				s.counters.last = nil
			}
			g := s.group()
			g.minutes = append(g.minutes, m)
			n++
		}
	}
}

// encodeCounts is a counter value: a version byte, then processed and
// failed as uvarints.
func encodeCounts(processed, failed int64) []byte {
	b := []byte{uniqueVersion}
	b = binary.AppendUvarint(b, uint64(processed))
	return binary.AppendUvarint(b, uint64(failed))
}

func decodeCounts(b []byte) (processed, failed int64, err error) {
	if len(b) == 0 || b[0] != uniqueVersion {
		return 0, 0, fmt.Errorf("%w: bad counter value", errCorruptRecord)
	}
	d := decoder{b: b[1:]}
	p, f := d.uvarint(), d.uvarint()
	if d.err != nil || len(d.b) != 0 || p > 1<<62 || f > p {
		return 0, 0, fmt.Errorf("%w: bad counter value", errCorruptRecord)
	}
	return int64(p), int64(f), nil
}

// Stats counts jobs per queue and state from the in-memory per-state
// sets (exact, O(queues) to read), finds each queue's oldest pending job,
// and returns the counters of the last p.Minutes minutes. It answers once
// every write it counted is durable.
func (s *store) Stats(ctx context.Context, p backend.StatsParams) (backend.Stats, error) {
	if err := s.begin(ctx); err != nil {
		return backend.Stats{}, err
	}
	defer s.end()
	if err := s.lockState(); err != nil {
		return backend.Stats{}, err
	}
	st, err := s.statsLocked(p)
	g := s.lastGroup()
	s.unlock()
	if err != nil {
		return backend.Stats{}, err
	}
	if err := wait(g); err != nil {
		return backend.Stats{}, err
	}
	return st, nil
}

// statsLocked reads Stats' answer; mu must be held.
func (s *store) statsLocked(p backend.StatsParams) (backend.Stats, error) {
	var st backend.Stats
	names := make([]string, 0, len(s.idx.queues))
	for name := range s.idx.queues {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		qi := s.idx.queues[name]
		info := backend.QueueInfo{Name: name, Counts: backend.NewCounts(), Settings: qi.settings}
		for _, state := range backend.States() {
			info.Counts[state] = int64(qi.count(state))
		}
		oldest, err := s.oldestPending(qi)
		if err != nil {
			return backend.Stats{}, err
		}
		info.OldestPending = oldest
		st.Queues = append(st.Queues, info)
	}
	if p.Minutes > 0 {
		last := backend.MinuteOf(p.Now)
		st.Minutes = make([]backend.MinuteCount, p.Minutes)
		for i := range st.Minutes {
			m := last.Add(-time.Duration(p.Minutes-1-i) * time.Minute)
			st.Minutes[i].Minute = m
			if c := s.counters.minutes[m.Unix()]; c != nil {
				st.Minutes[i].Processed, st.Minutes[i].Failed = c.processed, c.failed
			}
		}
	}
	for qm, c := range s.counters.queues {
		i, ok := slices.BinarySearchFunc(st.Queues, qm.queue, func(q backend.QueueInfo, name string) int { return strings.Compare(q.Name, name) })
		if ok {
			st.Queues[i].Add(p.Now, time.Unix(qm.minute, 0).UTC(), backend.AttemptCount{Processed: c.processed, Failed: c.failed})
		}
	}
	st.Processed, st.Failed = s.counters.processed, s.counters.failed
	return st, nil
}

// oldestPending returns the earliest RunAt among a queue's pending jobs.
// The ready heap is in claim order (priority first), so it is scanned;
// entries of jobs no longer pending are dropped on the way (once all of
// them, when one is met, so a mass cancel costs one pass). mu must be held.
func (s *store) oldestPending(qi *queueIndex) (time.Time, error) {
	pending := &qi.byState[stateCode(backend.StatePending)]
	compacted := false
	for pending.len() > 0 && qi.ready.len() > 0 {
		best := qi.ready.earliest()
		e := qi.ready.at(best)
		j, _, err := s.load(e.id)
		if err != nil {
			return time.Time{}, err
		}
		if j != nil && j.State == backend.StatePending && timeCode(j.RunAt) == e.runAt && int8(j.Priority) == e.prio {
			return j.RunAt, nil
		}
		if !compacted {
			qi.ready.filter(func(e readyEntry) bool { return pending.contains(e.id) })
			compacted = true
			continue
		}
		qi.ready.removeAt(best)
	}
	return time.Time{}, nil
}
