package postgres

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kyuhq/kyu/backend"
)

// Stats counts the jobs per queue and state in one statement (so the
// counts are one moment's, as List sees it), adds the queues' settings and
// reads the per-minute counters, summing their shards.
func (s *store) Stats(ctx context.Context, p backend.StatsParams) (backend.Stats, error) {
	if err := s.begin(ctx); err != nil {
		return backend.Stats{}, err
	}
	defer s.end()
	infos := map[string]*backend.QueueInfo{}
	info := func(q string) *backend.QueueInfo {
		if infos[q] == nil {
			infos[q] = &backend.QueueInfo{Name: q, Counts: backend.NewCounts()}
		}
		return infos[q]
	}
	last := backend.MinuteOf(p.Now)
	first := last.Add(-time.Duration(p.Minutes-1) * time.Minute)
	batch := &pgx.Batch{}
	batch.Queue(s.sqls.statsCounts)
	batch.Queue(s.sqls.statsQueues)
	batch.Queue(s.sqls.statsTotals)
	batch.Queue(s.sqls.statsMinutes, first, last)
	batch.Queue(s.sqls.statsQueueMinutes, last.Add(-backend.QueueStatsHistory+time.Minute), last)
	br := s.pool.SendBatch(ctx, batch)
	defer br.Close()

	rows, err := br.Query()
	if err != nil {
		return backend.Stats{}, s.wrap("stats: counts", err)
	}
	for rows.Next() {
		var q, state string
		var n int64
		var oldest pgtype.Timestamptz
		if err := rows.Scan(&q, &state, &n, &oldest); err != nil {
			rows.Close()
			return backend.Stats{}, s.wrap("stats: counts", err)
		}
		qi := info(q)
		qi.Counts[backend.State(state)] += n
		if oldest.Valid {
			qi.OldestPending = oldest.Time.UTC()
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return backend.Stats{}, s.wrap("stats: counts", err)
	}

	rows, err = br.Query()
	if err != nil {
		return backend.Stats{}, s.wrap("stats: queues", err)
	}
	for rows.Next() {
		var q string
		var paused bool
		var c, f, x int64
		if err := rows.Scan(&q, &paused, &c, &f, &x); err != nil {
			rows.Close()
			return backend.Stats{}, s.wrap("stats: queues", err)
		}
		info(q).Settings = backend.QueueSettings{Paused: paused, Retention: backend.QueueRetention{
			Completed: backend.Retention(c), Failed: backend.Retention(f), Cancelled: backend.Retention(x)}}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return backend.Stats{}, s.wrap("stats: queues", err)
	}

	var st backend.Stats
	if err := br.QueryRow().Scan(&st.Processed, &st.Failed); err != nil {
		return backend.Stats{}, s.wrap("stats: totals", err)
	}

	minutes := map[time.Time][2]int64{}
	rows, err = br.Query()
	if err != nil {
		return backend.Stats{}, s.wrap("stats: minutes", err)
	}
	for rows.Next() {
		var m time.Time
		var c [2]int64
		if err := rows.Scan(&m, &c[0], &c[1]); err != nil {
			rows.Close()
			return backend.Stats{}, s.wrap("stats: minutes", err)
		}
		minutes[m.UTC()] = c
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return backend.Stats{}, s.wrap("stats: minutes", err)
	}

	rows, err = br.Query()
	if err != nil {
		return backend.Stats{}, s.wrap("stats: queue minutes", err)
	}
	for rows.Next() {
		var q string
		var m time.Time
		var c backend.AttemptCount
		if err := rows.Scan(&q, &m, &c.Processed, &c.Failed); err != nil {
			rows.Close()
			return backend.Stats{}, s.wrap("stats: queue minutes", err)
		}
		if qi := infos[q]; qi != nil {
			qi.Add(p.Now, m.UTC(), c)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return backend.Stats{}, s.wrap("stats: queue minutes", err)
	}

	for _, qi := range infos {
		st.Queues = append(st.Queues, *qi)
	}
	slices.SortFunc(st.Queues, func(a, b backend.QueueInfo) int { return cmp.Compare(a.Name, b.Name) })
	for i := p.Minutes - 1; i >= 0; i-- {
		m := backend.MinuteCount{Minute: last.Add(-time.Duration(i) * time.Minute)}
		c := minutes[m.Minute]
		m.Processed, m.Failed = c[0], c[1]
		st.Minutes = append(st.Minutes, m)
	}
	return st, nil
}
