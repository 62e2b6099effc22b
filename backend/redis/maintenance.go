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

// defaultStepLimit bounds a maintenance step when the caller gives no Limit.
const defaultStepLimit = 1000

// eachQueue runs one maintenance script per queue, in name order, while
// the step has room left; its ARGV are now, the room left and what extra
// gives for the queue. step reads a script's reply and says how many jobs
// it acted on.
func (s *store) eachQueue(ctx context.Context, op string, p backend.MaintenanceParams, sc *script, extra func(queue string) []string, step func(reply rueidis.RedisResult) (int, error)) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	queues, err := s.queues.all(ctx)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(queues))
	for name := range queues {
		names = append(names, name)
	}
	slices.Sort(names)
	limit := p.Limit
	if limit <= 0 {
		limit = defaultStepLimit
	}
	nowS := strconv.FormatInt(p.Now.UnixMilli(), 10)
	for _, q := range names {
		if limit <= 0 {
			break
		}
		args := append([]string{nowS, strconv.Itoa(limit)}, extra(q)...)
		var reply rueidis.RedisResult
		err := s.retry(ctx, func(int) error {
			reply = s.eval(ctx, sc, s.keysOf(sc, queues[q]), args)
			return reply.Error()
		})
		if err != nil {
			return fmt.Errorf("kyu/redis: %s queue %q: %w", op, q, err)
		}
		n, err := step(reply)
		if err != nil {
			return fmt.Errorf("kyu/redis: %s queue %q: unexpected reply %s", op, q, reply.String())
		}
		limit -= n
	}
	return nil
}

// Promote makes due scheduled and retry jobs pending and cancels waiting
// jobs whose deadline has passed.
func (s *store) Promote(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	var res backend.MaintenanceResult
	err := s.eachQueue(ctx, "promote", p, s.scripts.promote, s.wakeArg, func(reply rueidis.RedisResult) (int, error) {
		v, err := reply.AsIntSlice()
		if err != nil || len(v) != 2 {
			return 0, fmt.Errorf("bad reply")
		}
		res.Moved += int(v[0])
		res.Cancelled += int(v[1])
		return int(v[0] + v[1]), nil
	})
	return res, err
}

// RecoverLeases ends expired leases.
func (s *store) RecoverLeases(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	var res backend.MaintenanceResult
	err := s.eachQueue(ctx, "recover leases", p, s.scripts.recover, s.wakeArg, func(reply rueidis.RedisResult) (int, error) {
		v, err := reply.AsIntSlice()
		if err != nil || len(v) != 2 {
			return 0, fmt.Errorf("bad reply")
		}
		res.Moved += int(v[0])
		res.Failed += int(v[1])
		return int(v[0]), nil
	})
	return res, err
}

// wakeArg is the ARGV that names a queue's wake channel.
func (s *store) wakeArg(queue string) []string { return []string{s.keys.wakeChannel(queue)} }

// ApplyRetention deletes final jobs whose retention has run out, forgets
// unique keys whose period has ended, drops per-minute counters older
// than backend.StatsHistory and removes expired worker entries.
func (s *store) ApplyRetention(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	var res backend.MaintenanceResult
	keep := ms(backend.MinuteOf(p.Now).Add(time.Minute - backend.StatsHistory).UnixMilli())
	err := s.eachQueue(ctx, "apply retention", p, s.scripts.retention, func(string) []string { return []string{keep} }, func(reply rueidis.RedisResult) (int, error) {
		n, err := reply.AsInt64()
		if err != nil {
			return 0, err
		}
		res.Moved += int(n)
		return int(n), nil
	})
	if err != nil {
		return res, err
	}
	return res, s.pruneWorkers(ctx, p.Now)
}
