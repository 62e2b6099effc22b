package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// Stats counts jobs per queue and state in one statement, the states
// that are not final over the index jobs_claim (whose first columns are
// the state and the queue), the final ones from final_counts, with the
// queues' settings, the per-minute counters and each queue's per-minute
// counters of the last hour, in one snapshot.
func (s *store) Stats(ctx context.Context, p backend.StatsParams) (backend.Stats, error) {
	if err := s.begin(ctx); err != nil {
		return backend.Stats{}, err
	}
	defer s.end()
	st, err := s.stats(ctx, p)
	return st, s.wrap("stats", err)
}

func (s *store) stats(ctx context.Context, p backend.StatsParams) (backend.Stats, error) {
	infos := map[string]*backend.QueueInfo{}
	info := func(q string) *backend.QueueInfo {
		if infos[q] == nil {
			infos[q] = &backend.QueueInfo{Name: q, Counts: backend.NewCounts()}
		}
		return infos[q]
	}
	// One snapshot for the counts and the settings.
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return backend.Stats{}, err
	}
	defer tx.Rollback() //nolint:errcheck // read only
	// The states that are not final are counted from their ranges of
	// the claim index; the final ones are kept in final_counts.
	rows, err := tx.QueryContext(ctx, `SELECT state, queue, count(*), min(CASE WHEN state = 'pending' THEN run_at END)
		FROM `+s.table("jobs")+` FORCE INDEX (jobs_claim) WHERE state IN ('scheduled', 'pending', 'active', 'retry')
		GROUP BY state, queue
		UNION ALL
		SELECT state, queue, sum(n), NULL FROM `+s.table("final_counts")+` GROUP BY state, queue HAVING sum(n) <> 0`)
	if err != nil {
		return backend.Stats{}, err
	}
	for rows.Next() {
		var state, queue string
		var n int64
		var oldest sql.NullInt64
		if err := rows.Scan(&state, &queue, &n, &oldest); err != nil {
			rows.Close()
			return backend.Stats{}, err
		}
		qi := info(queue)
		qi.Counts[backend.State(state)] += n
		if oldest.Valid {
			qi.OldestPending = fromMicros(oldest.Int64)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return backend.Stats{}, err
	}
	rows, err = tx.QueryContext(ctx, `SELECT name, paused, retain_completed, retain_failed, retain_cancelled FROM `+s.table("queues"))
	if err != nil {
		return backend.Stats{}, err
	}
	for rows.Next() {
		var name string
		var paused bool
		var c, f, x int64
		if err := rows.Scan(&name, &paused, &c, &f, &x); err != nil {
			rows.Close()
			return backend.Stats{}, err
		}
		info(name).Settings = backend.QueueSettings{Paused: paused, Retention: backend.QueueRetention{
			Completed: backend.Retention(c), Failed: backend.Retention(f), Cancelled: backend.Retention(x)}}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return backend.Stats{}, err
	}
	var st backend.Stats
	var processed, failed sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT sum(processed), sum(failed) FROM `+s.table("counters")).Scan(&processed, &failed); err != nil {
		return backend.Stats{}, err
	}
	st.Processed, st.Failed = processed.Int64, failed.Int64
	last := backend.MinuteOf(p.Now)
	if p.Minutes > 0 {
		first := last.Add(-time.Duration(p.Minutes-1) * time.Minute)
		counts := map[int64][2]int64{}
		rows, err := tx.QueryContext(ctx, `SELECT minute, sum(processed), sum(failed) FROM `+s.table("counters")+
			` WHERE minute >= ? AND minute <= ? GROUP BY minute`, micros(first), micros(last))
		if err != nil {
			return backend.Stats{}, err
		}
		for rows.Next() {
			var m, pr, fa int64
			if err := rows.Scan(&m, &pr, &fa); err != nil {
				rows.Close()
				return backend.Stats{}, err
			}
			counts[m] = [2]int64{pr, fa}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return backend.Stats{}, err
		}
		for i := p.Minutes - 1; i >= 0; i-- {
			m := backend.MinuteCount{Minute: last.Add(-time.Duration(i) * time.Minute)}
			c := counts[micros(m.Minute)]
			m.Processed, m.Failed = c[0], c[1]
			st.Minutes = append(st.Minutes, m)
		}
	}
	// Each queue's rates, from its minutes of the last hour.
	rows, err = tx.QueryContext(ctx, `SELECT queue, minute, sum(processed), sum(failed) FROM `+s.table("queue_counters")+
		` WHERE minute >= ? AND minute <= ? GROUP BY queue, minute`, micros(last.Add(-backend.QueueStatsHistory+time.Minute)), micros(last))
	if err != nil {
		return backend.Stats{}, err
	}
	for rows.Next() {
		var q string
		var m int64
		var c backend.AttemptCount
		if err := rows.Scan(&q, &m, &c.Processed, &c.Failed); err != nil {
			rows.Close()
			return backend.Stats{}, err
		}
		if qi := infos[q]; qi != nil {
			qi.Add(p.Now, fromMicros(m), c)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return backend.Stats{}, err
	}
	for _, qi := range infos {
		st.Queues = append(st.Queues, *qi)
	}
	slices.SortFunc(st.Queues, func(a, b backend.QueueInfo) int { return cmp.Compare(a.Name, b.Name) })
	return st, nil
}
