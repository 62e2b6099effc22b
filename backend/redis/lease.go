package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/redis/rueidis"
)

// leaseBatch groups the items of a Heartbeat, Complete, Fail, Release or Report
// call by queue, so each queue gets one script run and all of them go in
// one pipelined round trip.
type leaseBatch struct {
	groups []*leaseGroup
	// codes holds each item's outcome: 0 done, 1 lease lost, 2 no such
	// job (3: heartbeat done, cancel requested).
	codes []int64
}

type leaseGroup struct {
	queue string
	num   uint32
	pos   []int
}

// leaseCall runs sc for the jobs ids, one script per queue and all of
// them in one round trip: a group's ARGV is head(queue, try) (try counts
// the tries of the round trip, 0 first), then item's values for each of
// its jobs (i indexes ids). It is the body of Heartbeat, Complete, Fail,
// Release and Report.
func (s *store) leaseCall(ctx context.Context, op string, sc *script, ids []string,
	head func(queue string, try int) []string, item func(args []string, i int) []string) (*leaseBatch, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	b, err := s.group(ctx, ids)
	if err != nil {
		return nil, err
	}
	run := func(b *leaseBatch) error {
		return s.runBatch(ctx, op, sc, b, func(g *leaseGroup, try int) []string {
			args := head(g.queue, try)
			for _, i := range g.pos {
				args = item(args, i)
			}
			return args
		})
	}
	if err := run(b); err != nil {
		return nil, err
	}
	// A job not found where its id points may be an imported one that
	// lives elsewhere (see Import): try its home.
	again := &leaseBatch{codes: b.codes}
	byNum := map[uint32]*leaseGroup{}
	for _, g := range b.groups {
		for _, i := range g.pos {
			if b.codes[i] != 2 {
				continue
			}
			num, queue, ok, err := s.elsewhere(ctx, ids[i], g.num)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			h := byNum[num]
			if h == nil {
				h = &leaseGroup{queue: queue, num: num}
				byNum[num] = h
				again.groups = append(again.groups, h)
			}
			h.pos = append(h.pos, i)
		}
	}
	if len(again.groups) > 0 {
		if err := run(again); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// group sorts the job ids into queue groups; ids naming no queue are
// marked "no such job".
func (s *store) group(ctx context.Context, ids []string) (*leaseBatch, error) {
	b := &leaseBatch{codes: make([]int64, len(ids))}
	byNum := map[uint32]*leaseGroup{}
	for i, id := range ids {
		num, ok := queueNumOf(id)
		if !ok {
			b.codes[i] = 2
			continue
		}
		g := byNum[num]
		if g == nil {
			name, ok, err := s.queues.name(ctx, num)
			if err != nil {
				return nil, err
			}
			if !ok {
				// No queue has the id's number: an imported job's, perhaps.
				if num, name, ok, err = s.jobHome(ctx, id); err != nil {
					return nil, err
				}
				if !ok {
					b.codes[i] = 2
					continue
				}
				if g = byNum[num]; g != nil {
					g.pos = append(g.pos, i)
					continue
				}
			}
			g = &leaseGroup{queue: name, num: num}
			byNum[num] = g
			b.groups = append(b.groups, g)
		}
		g.pos = append(g.pos, i)
	}
	return b, nil
}

// runBatch sends one script per group, retrying the whole round trip while the
// server cannot be reached; args builds a group's ARGV for the given try.
// A script replies with a code per item, or with 0 alone when every
// item's code is 0 (complete.lua does). The groups that "complete
// plain" leaves to complete.lua (-1 or -2, see lua/complete.lua) then go
// to complete.lua in a second round trip.
func (s *store) runBatch(ctx context.Context, op string, sc *script, b *leaseBatch, args func(g *leaseGroup, try int) []string) error {
	if len(b.groups) == 0 {
		return nil
	}
	var replies []rueidis.RedisResult
	err := s.retry(ctx, func(try int) error {
		calls := make([]call, len(b.groups))
		for i, g := range b.groups {
			gsc := sc
			if _, ok := s.fullComplete.Load(g.num); ok && sc == s.scripts.completePlain {
				gsc = s.scripts.complete
			}
			calls[i] = call{s: gsc, keys: s.keysOf(gsc, g.num), args: args(g, try)}
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
		return fmt.Errorf("kyu/redis: %s: %w", op, err)
	}
	// The groups that "complete plain" left to complete.lua.
	var full *leaseBatch
	for gi, g := range b.groups {
		if n, err := replies[gi].AsInt64(); err == nil && n <= 0 {
			switch {
			case n == 0:
				// Every item done: complete.lua's short reply.
				for _, i := range g.pos {
					b.codes[i] = 0
				}
				continue
			case sc == s.scripts.completePlain:
				if n == -2 {
					s.fullComplete.Store(g.num, true)
				}
				if full == nil {
					full = &leaseBatch{codes: b.codes}
				}
				full.groups = append(full.groups, g)
				continue
			}
		}
		codes, err := replies[gi].AsIntSlice()
		if err != nil || len(codes) != len(g.pos) {
			return fmt.Errorf("kyu/redis: %s: unexpected reply %s", op, replies[gi].String())
		}
		for k, c := range codes {
			b.codes[g.pos[k]] = c
		}
	}
	if full != nil {
		// "complete plain" changed nothing in these queues.
		return s.runBatch(ctx, op, s.scripts.complete, full, args)
	}
	return nil
}

// itemErr turns a script's code into the item's error.
func itemErr(code int64) error {
	switch code {
	case 0:
		return nil
	case 2:
		return backend.ErrNotFound
	default:
		return backend.ErrLeaseLost
	}
}

func batchResult(b *leaseBatch) backend.BatchResult {
	res := backend.BatchResult{Errors: make([]error, len(b.codes))}
	for i, c := range b.codes {
		res.Errors[i] = itemErr(c)
	}
	return res
}

// nowAndWake is the head of a script that takes now and the queue's wake
// channel (Fail and Release wake the queue when a job becomes pending).
func (s *store) nowAndWake(now time.Time) func(queue string, try int) []string {
	return func(q string, _ int) []string { return []string{ms(now.UnixMilli()), s.keys.wakeChannel(q)} }
}

func leaseIDs(ls []backend.Lease) []string {
	ids := make([]string, len(ls))
	for i, l := range ls {
		ids[i] = l.JobID
	}
	return ids
}

func ms(t int64) string { return strconv.FormatInt(t, 10) }

// flag is a boolean as the scripts take it.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// Heartbeat extends every live lease to p.Now+p.Extend.
func (s *store) Heartbeat(ctx context.Context, p backend.HeartbeatParams) (backend.HeartbeatResult, error) {
	exp := p.Now.Add(p.Extend)
	b, err := s.leaseCall(ctx, "heartbeat", s.scripts.heartbeat, leaseIDs(p.Leases),
		func(string, int) []string { return []string{ms(p.Now.UnixMilli()), ms(exp.UnixMilli())} },
		func(args []string, i int) []string {
			return append(args, p.Leases[i].JobID, strconv.FormatInt(p.Leases[i].Token, 10))
		})
	if err != nil {
		return backend.HeartbeatResult{}, err
	}
	res := backend.HeartbeatResult{Leases: make([]backend.LeaseStatus, len(p.Leases))}
	for i, c := range b.codes {
		if c == 0 || c == 3 {
			res.Leases[i] = backend.LeaseStatus{ExpiresAt: time.UnixMilli(exp.UnixMilli()).UTC(), CancelRequested: c == 3}
		} else {
			res.Leases[i] = backend.LeaseStatus{Lost: true}
		}
	}
	return res, nil
}

// Complete finishes the jobs whose leases are live.
func (s *store) Complete(ctx context.Context, p backend.CompleteParams) (backend.BatchResult, error) {
	ids := make([]string, len(p.Items))
	for i, it := range p.Items {
		ids[i] = it.Lease.JobID
	}
	// A call passes results only when an item has one (most calls store
	// none): the second flag says whether it does. The first tells the
	// script that an earlier try may have run.
	results := false
	for _, it := range p.Items {
		results = results || len(it.Result) > 0
	}
	// The script keeps each job's new record for a later item of the
	// same job only when the call names a job twice.
	distinct := distinctIDs(ids)
	// A call without results goes to "complete plain" (fewer keys; see
	// runBatch).
	sc := s.scripts.complete
	if !results {
		sc = s.scripts.completePlain
	}
	b, err := s.leaseCall(ctx, "complete", sc, ids,
		func(_ string, try int) []string {
			return []string{ms(p.Now.UnixMilli()), flag(try > 0), flag(results), flag(distinct)}
		},
		func(args []string, i int) []string {
			it := p.Items[i]
			args = append(args, it.Lease.JobID, strconv.FormatInt(it.Lease.Token, 10))
			if results {
				args = append(args, string(it.Result))
			}
			return args
		})
	if err != nil {
		return backend.BatchResult{}, err
	}
	return batchResult(b), nil
}

// distinctIDs reports whether no id is in ids twice.
func distinctIDs(ids []string) bool {
	seen := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		if _, ok := seen[id]; ok {
			return false
		}
		seen[id] = struct{}{}
	}
	return true
}

// Fail ends the attempts: retry, pending at once, or failed.
func (s *store) Fail(ctx context.Context, p backend.FailParams) (backend.BatchResult, error) {
	ids := make([]string, len(p.Items))
	for i, it := range p.Items {
		ids[i] = it.Lease.JobID
	}
	b, err := s.leaseCall(ctx, "fail", s.scripts.fail, ids, s.nowAndWake(p.Now),
		func(args []string, i int) []string {
			it := p.Items[i]
			return append(args, it.Lease.JobID, strconv.FormatInt(it.Lease.Token, 10), it.Message, it.Stack, msOf(it.RetryAt), flag(it.Final), flag(it.Cancel))
		})
	if err != nil {
		return backend.BatchResult{}, err
	}
	return batchResult(b), nil
}

// Release hands the jobs back to pending, their attempt not counted.
func (s *store) Release(ctx context.Context, p backend.ReleaseParams) (backend.BatchResult, error) {
	b, err := s.leaseCall(ctx, "release", s.scripts.release, leaseIDs(p.Leases), s.nowAndWake(p.Now),
		func(args []string, i int) []string {
			return append(args, p.Leases[i].JobID, strconv.FormatInt(p.Leases[i].Token, 10))
		})
	if err != nil {
		return backend.BatchResult{}, err
	}
	return batchResult(b), nil
}
