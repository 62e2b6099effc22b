package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/redis/rueidis"
)

// Stats reads every queue's statistics with one script per queue
// (lua/stats.lua), all in one round trip: the counts are the sizes of the
// sets that hold each state's jobs (ready, leases and the in sets), so
// they agree with List; the per-minute counters and totals are summed
// over the queues here.
func (s *store) Stats(ctx context.Context, p backend.StatsParams) (backend.Stats, error) {
	if err := s.enter(); err != nil {
		return backend.Stats{}, err
	}
	defer s.leave()
	queues, err := s.queues.all(ctx)
	if err != nil {
		return backend.Stats{}, err
	}
	names := make([]string, 0, len(queues))
	for name := range queues {
		names = append(names, name)
	}
	slices.Sort(names)
	first := backend.MinuteOf(p.Now).Add(-time.Duration(p.Minutes-1) * time.Minute)
	st := backend.Stats{Queues: make([]backend.QueueInfo, 0, len(names))}
	if p.Minutes > 0 {
		st.Minutes = make([]backend.MinuteCount, p.Minutes)
		for i := range st.Minutes {
			st.Minutes[i].Minute = first.Add(time.Duration(i) * time.Minute)
		}
	}
	if len(names) == 0 {
		return st, nil
	}
	rateMinutes := int(backend.QueueStatsHistory / time.Minute)
	rateFirst := backend.MinuteOf(p.Now).Add(-time.Duration(rateMinutes-1) * time.Minute)
	args := []string{ms(first.UnixMilli()), strconv.Itoa(p.Minutes), ms(rateFirst.UnixMilli()), strconv.Itoa(rateMinutes)}
	var replies []rueidis.RedisResult
	err = s.retry(ctx, func(int) error {
		calls := make([]call, len(names))
		for i, name := range names {
			calls[i] = call{s: s.scripts.stats, keys: s.keysOf(s.scripts.stats, queues[name]), args: args}
		}
		replies = s.evalMany(ctx, calls)
		for _, r := range replies {
			if err := r.Error(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return backend.Stats{}, fmt.Errorf("kyu/redis: stats: %w", err)
	}
	for i, name := range names {
		info, totals, minutes, err := queueStats(name, replies[i], p.Minutes+rateMinutes)
		if err != nil {
			return backend.Stats{}, err
		}
		for k := range rateMinutes {
			c := backend.AttemptCount{Processed: minutes[2*(p.Minutes+k)], Failed: minutes[2*(p.Minutes+k)+1]}
			info.Add(p.Now, rateFirst.Add(time.Duration(k)*time.Minute), c)
		}
		st.Queues = append(st.Queues, info)
		st.Processed += totals[0]
		st.Failed += totals[1]
		for k := range st.Minutes {
			st.Minutes[k].Processed += minutes[2*k]
			st.Minutes[k].Failed += minutes[2*k+1]
		}
	}
	return st, nil
}

// statsStates are the states in the order lua/stats.lua counts them.
func statsStates() []backend.State {
	return []backend.State{
		backend.StatePending, backend.StateActive, backend.StateScheduled, backend.StateRetry,
		backend.StateCompleted, backend.StateFailed, backend.StateCancelled,
	}
}

// queueStats reads one queue's lua/stats.lua reply.
func queueStats(name string, reply rueidis.RedisResult, minutes int) (info backend.QueueInfo, totals [2]int64, perMinute []int64, err error) {
	bad := func() error {
		return fmt.Errorf("kyu/redis: stats of queue %s: unexpected reply %s", name, reply.String())
	}
	v, err := reply.ToArray()
	if err != nil || len(v) != 14+2*minutes {
		return info, totals, nil, bad()
	}
	info = backend.QueueInfo{Name: name, Counts: backend.NewCounts()}
	for i, state := range statsStates() {
		n, err := v[i].AsInt64()
		if err != nil {
			return info, totals, nil, bad()
		}
		info.Counts[state] = n
	}
	str := make([]string, len(v)-7)
	for i := range str {
		if str[i], err = v[7+i].ToString(); err != nil {
			return info, totals, nil, bad()
		}
	}
	if str[0] != "" {
		oldest, err := strconv.ParseInt(str[0], 10, 64)
		if err != nil {
			return info, totals, nil, bad()
		}
		info.OldestPending = time.UnixMilli(oldest).UTC()
	}
	if info.Settings, err = decodeSettings(name, str[1:5]); err != nil {
		return info, totals, nil, err
	}
	counters := make([]int64, len(str)-5)
	for i, c := range str[5:] {
		if c == "" {
			continue
		}
		if counters[i], err = strconv.ParseInt(c, 10, 64); err != nil {
			return info, totals, nil, bad()
		}
	}
	return info, [2]int64{counters[0], counters[1]}, counters[2:], nil
}
