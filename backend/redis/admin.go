package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// jobOp runs a script that acts on one job and answers with a view (see
// view in lua/common.lua): Cancel, Retry and RunNow. args follow the id.
func (s *store) jobOp(ctx context.Context, op, id string, now time.Time, sc *script, args func(queue string) []string) (*backend.Job, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	num, queue, ok, err := s.jobQueue(ctx, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, backend.ErrNotFound
	}
	reply, err := s.runOne(ctx, op+" "+id, num, sc, append([]string{id, ms(now.UnixMilli())}, args(queue)...))
	if err != nil {
		return nil, err
	}
	code, j, other, err := viewReply(op, id, queue, reply)
	if err != nil {
		return nil, err
	}
	if code == 2 {
		// Not where its id points: an imported job lives at its home.
		hnum, hqueue, ok, err := s.elsewhere(ctx, id, num)
		if err != nil {
			return nil, err
		}
		if ok {
			num, queue = hnum, hqueue
			if reply, err = s.runOne(ctx, op+" "+id, num, sc, append([]string{id, ms(now.UnixMilli())}, args(queue)...)); err != nil {
				return nil, err
			}
			if code, j, other, err = viewReply(op, id, queue, reply); err != nil {
				return nil, err
			}
		}
	}
	switch code {
	case 0:
		return j, nil
	case 2:
		return nil, backend.ErrNotFound
	case 3:
		state, ok := stateOfCode(other)
		if !ok {
			return nil, fmt.Errorf("%w: job %s: unknown state %q", ErrCorrupt, id, other)
		}
		return nil, &backend.StateError{Op: op, ID: id, State: state}
	case 4:
		return nil, fmt.Errorf("%w: job %s: the record does not parse", ErrCorrupt, id)
	case 5:
		return nil, fmt.Errorf("kyu/redis: retry %s: %w (by job %s)", id, backend.ErrUniqueKeyHeld, other)
	}
	return nil, fmt.Errorf("kyu/redis: %s %s: unexpected reply %s", op, id, reply.String())
}

func noArgs(string) []string { return nil }

// Cancel cancels a waiting job at once, or records the request on an
// active one (lua/cancel.lua).
func (s *store) Cancel(ctx context.Context, p backend.CancelParams) (*backend.Job, error) {
	return s.jobOp(ctx, "cancel", p.ID, p.Now, s.scripts.cancel, noArgs)
}

// Retry sends a failed or cancelled job back to pending (lua/retry.lua).
func (s *store) Retry(ctx context.Context, p backend.RetryParams) (*backend.Job, error) {
	return s.jobOp(ctx, "retry", p.ID, p.Now, s.scripts.retry, s.wakeArg)
}

// RunNow makes a scheduled or retry job pending at once (lua/run_now.lua).
func (s *store) RunNow(ctx context.Context, p backend.RunNowParams) (*backend.Job, error) {
	return s.jobOp(ctx, "run now", p.ID, p.Now, s.scripts.runNow, s.wakeArg)
}

// RetryQueue retries up to p.Limit failed or cancelled jobs of a queue,
// oldest first, in one script run.
func (s *store) RetryQueue(ctx context.Context, p backend.RetryQueueParams) (backend.CountResult, error) {
	return s.bulk(ctx, "retry queue "+p.Queue, p.Queue, s.scripts.retryQueue, func(uint32) ([]string, error) {
		return []string{ms(p.Now.UnixMilli()), s.keys.wakeChannel(p.Queue), stateCode(p.State), strconv.Itoa(p.Limit)}, nil
	})
}

// Purge deletes up to p.Limit jobs of a queue in one state, oldest first,
// in one script run. Pending jobs have no id-ordered set (keys.go): their
// ids are read from the ready set and sorted here, and the script deletes
// those still pending.
func (s *store) Purge(ctx context.Context, p backend.PurgeParams) (backend.CountResult, error) {
	code := stateCode(p.State)
	return s.bulk(ctx, "purge "+p.Queue, p.Queue, s.scripts.purge, func(num uint32) ([]string, error) {
		args := []string{ms(p.Now.UnixMilli()), code, strconv.Itoa(p.Limit)}
		if hasInSet(code) {
			return args, nil
		}
		ids, err := s.allOf(ctx, s.keys.queue(num).ready())
		if err != nil {
			return nil, err
		}
		// Twice the limit, so that jobs claimed meanwhile do not end the
		// caller's repetition early (the script stops at the limit).
		slices.Sort(ids)
		return append(args, ids[:min(len(ids), 2*p.Limit)]...), nil
	})
}

// allOf reads every member of a sorted set.
func (s *store) allOf(ctx context.Context, key string) ([]string, error) {
	var ids []string
	err := s.retry(ctx, func(int) error {
		var err error
		ids, err = s.client.Do(ctx, s.client.B().Zrange().Key(key).Min("0").Max("-1").Build()).AsStrSlice()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("kyu/redis: read %s: %w", key, err)
	}
	return ids, nil
}

// bulk runs a script over one queue that answers with a count.
func (s *store) bulk(ctx context.Context, op, queue string, sc *script, args func(num uint32) ([]string, error)) (backend.CountResult, error) {
	if err := s.enter(); err != nil {
		return backend.CountResult{}, err
	}
	defer s.leave()
	num, ok, err := s.queues.number(ctx, queue, false)
	if err != nil || !ok {
		return backend.CountResult{}, err
	}
	a, err := args(num)
	if err != nil {
		return backend.CountResult{}, err
	}
	reply, err := s.runOne(ctx, op, num, sc, a)
	if err != nil {
		return backend.CountResult{}, err
	}
	n, err := reply.AsInt64()
	if err != nil {
		return backend.CountResult{}, fmt.Errorf("kyu/redis: %s: unexpected reply %s", op, reply.String())
	}
	return backend.CountResult{Count: int(n)}, nil
}

// Report records progress and log lines under live leases: one script
// per queue, all in one round trip. Lines are encoded here, stamped with
// p.Now; the script keeps the first p.MaxLines() of a job's lines and
// counts the rest as dropped.
func (s *store) Report(ctx context.Context, p backend.ReportParams) (backend.BatchResult, error) {
	ids := make([]string, len(p.Items))
	for i, it := range p.Items {
		ids[i] = it.Lease.JobID
	}
	b, err := s.leaseCall(ctx, "report", s.scripts.report, ids,
		func(string, int) []string { return []string{ms(p.Now.UnixMilli()), strconv.Itoa(p.MaxLines())} },
		func(args []string, i int) []string {
			it := p.Items[i]
			prog := ""
			if it.Progress != nil {
				prog = encodeProgress(it.Progress, p.Now)
			}
			args = append(args, it.Lease.JobID, strconv.FormatInt(it.Lease.Token, 10), prog, strconv.Itoa(len(it.Logs)))
			for _, l := range it.Logs {
				args = append(args, encodeLine(l, p.Now))
			}
			return args
		})
	if err != nil {
		return backend.BatchResult{}, err
	}
	return batchResult(b), nil
}

// UpdateQueue changes a queue's settings (its settings hash, keys.go) and
// returns them. The queue gets its number if it has none.
func (s *store) UpdateQueue(ctx context.Context, p backend.UpdateQueueParams) (backend.QueueSettings, error) {
	if err := s.enter(); err != nil {
		return backend.QueueSettings{}, err
	}
	defer s.leave()
	args := []string{p.Queue, "", "0", "", "", "", "", "", "", ms(p.Now.UnixMilli()), s.keys.wakeChannel(p.Queue)}
	if p.Paused != nil {
		args[1] = flag(*p.Paused)
	}
	if r := p.Retention; r != nil {
		args[2] = "1"
		for i, v := range []backend.Retention{r.Completed, r.Failed, r.Cancelled} {
			if v != backend.RetainDefault {
				args[3+2*i], args[4+2*i] = retentionField(v), v.String()
			}
		}
	}
	for try := 0; ; try++ {
		num, _, err := s.queues.number(ctx, p.Queue, true)
		if err != nil {
			return backend.QueueSettings{}, err
		}
		reply, err := s.runOne(ctx, "update queue "+p.Queue, num, s.scripts.updateQueue, args)
		if err != nil && staleQueue(reply.Error()) && try == 0 {
			s.queues.forget(p.Queue)
			continue
		}
		if err != nil {
			return backend.QueueSettings{}, err
		}
		v, err := reply.AsStrSlice()
		if err != nil || len(v) != 4 {
			return backend.QueueSettings{}, fmt.Errorf("kyu/redis: update queue %s: unexpected reply %s", p.Queue, reply.String())
		}
		return decodeSettings(p.Queue, v)
	}
}

// decodeSettings reads {paused, tc, tf, tx} (see lua/update_queue.lua).
func decodeSettings(queue string, v []string) (backend.QueueSettings, error) {
	qs := backend.QueueSettings{Paused: v[0] == "1"}
	for i, dst := range []*backend.Retention{&qs.Retention.Completed, &qs.Retention.Failed, &qs.Retention.Cancelled} {
		r, err := backend.ParseRetention(v[1+i])
		if err != nil {
			return backend.QueueSettings{}, fmt.Errorf("%w: settings of queue %s: %v", ErrCorrupt, queue, err)
		}
		*dst = r
	}
	return qs, nil
}
