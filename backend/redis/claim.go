package redis

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/kyuhq/kyu/backend"
	"github.com/redis/rueidis"
)

// promoteBound caps how many due scheduled or retry jobs, and how many
// jobs past their deadline, one claim script moves in one queue; a
// backlog larger than that is moved by the following claims and Promote.
const promoteBound = 1000

// Claim leases up to p.Max jobs: one script run per queue, in the order
// p.Mode gives, until p.Max jobs are claimed or every queue was asked.
// With p.Types the script walks the queue's ready set past the jobs of
// other types, up to backend.ClaimTypeScan of them.
func (s *store) Claim(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	if err := s.enter(); err != nil {
		return backend.ClaimResult{}, err
	}
	defer s.leave()
	return s.claim(ctx, s.client, p, false)
}

// claim is Claim through d: the shared client, or a connection of its own
// (waitclaim.go). With look set (a waiting claim's look, which mostly
// finds nothing) a claim with no type filter and no byte budget runs
// "claim lean" (lua/claim_lean.lua) in each queue.
func (s *store) claim(ctx context.Context, d rueidis.CoreClient, p backend.ClaimParams, look bool) (backend.ClaimResult, error) {
	var res backend.ClaimResult
	if p.Max <= 0 || len(p.Queues) == 0 {
		return res, nil
	}
	queues := p.Queues
	if p.Mode == backend.ClaimWeighted {
		queues = weightedOrder(p.Queues, p.Weights)
	}
	seen := map[string]bool{}
	used, taken := 0, 0 // payload bytes and jobs taken, as the scripts count them
	for _, q := range queues {
		if len(res.Jobs) >= p.Max || seen[q] || res.Truncated {
			continue
		}
		seen[q] = true
		args := claimArgs(p, q, len(res.Jobs), used, taken)
		got, err := s.claimQueue(ctx, d, q, args, p.WorkerID, look && leanClaim(p), !look && leanClaim(p))
		if err != nil {
			return res, err
		}
		res.Jobs = append(res.Jobs, got.jobs...)
		used += got.bytes
		taken += got.taken
		res.Truncated = got.stopped
	}
	slices.SortStableFunc(res.Jobs, func(a, b *backend.Job) int { return cmp.Compare(b.Priority, a.Priority) })
	return res, nil
}

// claimArgs is the claim script's ARGV for queue q of claim p, after
// earlier queues of the claim gave it got jobs, used payload bytes and
// taken jobs as the scripts count them.
func claimArgs(p backend.ClaimParams, q string, got, used, taken int) []string {
	left, took := "", "0"
	if p.MaxBytes > 0 {
		left = strconv.Itoa(p.MaxBytes - used)
	}
	if taken > 0 {
		took = "1"
	}
	args := []string{strconv.FormatInt(p.Now.UnixMilli(), 10), strconv.Itoa(p.Max - got),
		strconv.FormatInt(p.Now.Add(p.Lease).UnixMilli(), 10), hex.EncodeToString([]byte(p.WorkerID)),
		strconv.Itoa(promoteBound), q, left, took}
	if len(p.Types) > 0 {
		args = append(append(args, strconv.Itoa(backend.ClaimTypeScan)), p.Types...)
	}
	return args
}

// claimQueue runs the claim script on one queue, through d; with lean,
// "claim lean" first (see claimLeanCall), with plain "claim plain" (the
// claim script with fewer keys, see scriptSpec) first: either leaves
// the claim to the claim script when the queue has work only it does.
// When the queue's keys are not
// marked as its own (the data was lost, and the cached number may be
// another queue's now), it asks the registry again, once.
func (s *store) claimQueue(ctx context.Context, d rueidis.CoreClient, q string, args []string, workerID string, lean, plain bool) (queueClaim, error) {
	for try := 0; ; try++ {
		num, ok, err := s.queues.number(ctx, q, false)
		if err != nil || !ok {
			return queueClaim{}, err
		}
		var reply rueidis.RedisResult
		pairs := true // a reply of claim.lua's, not of "claim lean"
		err = s.retry(ctx, func(int) error {
			pairs = true
			if lean {
				reply, pairs = s.evalOn(ctx, d, s.claimLeanCall(num, q, args)), false
				if !leftToClaim(reply) {
					return reply.Error()
				}
				pairs = true
			}
			if plain {
				reply = s.evalOn(ctx, d, call{s: s.scripts.claimPlain, keys: s.keysOf(s.scripts.claimPlain, num), args: args})
				if !leftToClaim(reply) {
					return reply.Error()
				}
			}
			reply = s.evalOn(ctx, d, call{s: s.scripts.claim, keys: s.keysOf(s.scripts.claim, num), args: args})
			return reply.Error()
		})
		if staleQueue(err) {
			s.queues.forget(q)
			if try == 0 {
				continue
			}
			// Registered but not yet marked (a registration in flight),
			// or marked for another queue: nothing of q's is there.
			return queueClaim{}, nil
		}
		if err != nil {
			return queueClaim{}, fmt.Errorf("kyu/redis: claim from queue %q: %w", q, err)
		}
		return s.claimed(q, reply, args[3], workerID, pairs)
	}
}

// queueClaim is what the claim script took from one queue.
type queueClaim struct {
	jobs    []*backend.Job
	taken   int  // jobs leased, also those whose record did not decode here
	bytes   int  // payload bytes taken
	stopped bool // stopped for the byte budget
}

// claimed decodes a claim script's reply: claim.lua's (pairs set, see
// claimedPairs) or "claim lean"'s (see claimedFlat); workerHex and
// workerID are the claimer's id as the records hold it and as it is.
func (s *store) claimed(queue string, reply rueidis.RedisResult, workerHex, workerID string, pairs bool) (queueClaim, error) {
	flat, err := reply.AsStrSlice()
	if err != nil {
		return queueClaim{}, fmt.Errorf("kyu/redis: claim: unexpected reply %s", reply.String())
	}
	if pairs {
		return s.claimedPairs(queue, flat, workerHex, workerID)
	}
	return s.claimedFlat(queue, flat, workerHex, workerID)
}

// claimedFlat is claimed of a reply read as strings in the form of
// "claim lean" (common.lua's claimLean): stopped, bytes, then {id,
// record, errors} per job.
func (s *store) claimedFlat(queue string, flat []string, workerHex, workerID string) (queueClaim, error) {
	if len(flat) < 2 || (len(flat)-2)%3 != 0 {
		return queueClaim{}, fmt.Errorf("kyu/redis: claim: unexpected reply of %d values", len(flat))
	}
	res, err := claimHead(flat[0], flat[1])
	if err != nil {
		return res, err
	}
	return s.claimedJobs(queue, res, flat[2:], 3, nil, workerHex, workerID), nil
}

// claimedPairs is claimed of a reply read as strings in claim.lua's
// form: stopped, bytes, the number n of jobs with errors, {id, record}
// per job, then {position, errors} for those n jobs (positions from 1,
// ascending): most jobs have none, and a value costs Redis its making
// and sending.
func (s *store) claimedPairs(queue string, flat []string, workerHex, workerID string) (queueClaim, error) {
	if len(flat) < 3 {
		return queueClaim{}, fmt.Errorf("kyu/redis: claim: unexpected reply of %d values", len(flat))
	}
	res, err := claimHead(flat[0], flat[1])
	if err != nil {
		return res, err
	}
	n, err := strconv.Atoi(flat[2])
	if err != nil || n < 0 || 3+2*n > len(flat) || (len(flat)-3-2*n)%2 != 0 {
		return queueClaim{}, fmt.Errorf("kyu/redis: claim: unexpected reply of %d values, %q with errors", len(flat), flat[2])
	}
	split := len(flat) - 2*n
	return s.claimedJobs(queue, res, flat[3:split], 2, flat[split:], workerHex, workerID), nil
}

// claimHead is the queueClaim of a claim reply's first two values.
func claimHead(stopped, bytes string) (queueClaim, error) {
	used, err := strconv.Atoi(bytes)
	if err != nil {
		return queueClaim{}, fmt.Errorf("kyu/redis: claim: unexpected reply: bytes %q", bytes)
	}
	return queueClaim{bytes: used, stopped: stopped == "1"}, nil
}

// claimedJobs decodes the jobs of a claim reply into res: flat holds
// {id, record} per job, with its errors when stride is 3; with stride 2
// errs holds {position, errors} of the jobs that have any. The jobs
// share one allocation, their payloads another, their strings the
// reply's and the worker id, as they come and go together.
func (s *store) claimedJobs(queue string, res queueClaim, flat []string, stride int, errs []string, workerHex, workerID string) queueClaim {
	all := make([]backend.Job, len(flat)/stride)
	jobs := make([]*backend.Job, 0, len(all))
	sh := &recordShare{workerHex: workerHex, workerID: workerID}
	for i := 1; i < len(flat); i += stride {
		sh.rest += len(flat[i])
	}
	for i := 0; i < len(flat); i += stride {
		id, rec, e := flat[i], flat[i+1], ""
		if stride == 3 {
			e = flat[i+2]
		} else if len(errs) >= 2 && errs[0] == strconv.Itoa(i/stride+1) {
			e, errs = errs[1], errs[2:]
		}
		if rec == "" {
			s.log.Error("dropped a corrupt job from its queue's ready set", "id", id, "queue", queue, "err", ErrCorrupt)
			continue
		}
		res.taken++
		j := &all[i/stride]
		err := decodeRecordTo(j, id, queue, rec, sh)
		sh.rest -= len(rec)
		if err == nil {
			j.Errors, err = decodeErrors(id, e)
		}
		if err != nil {
			// The script only hands out records it could parse; this one's
			// body is damaged. Its lease will expire and retry it.
			s.log.Error("claimed a job whose record does not parse", "id", id, "queue", queue, "err", err)
			continue
		}
		jobs = append(jobs, j)
	}
	res.jobs = jobs
	return res
}

// weightedOrder draws an order of the queues at random, each queue's
// chance to come next in proportion to its weight (default 1; a weight
// below 1 counts as 1).
func weightedOrder(queues []string, weights map[string]int) []string {
	left := slices.Clone(queues)
	out := make([]string, 0, len(left))
	for len(left) > 0 {
		total := 0
		for _, q := range left {
			total += weightOf(q, weights)
		}
		n := rand.IntN(total)
		for i, q := range left {
			if n -= weightOf(q, weights); n < 0 {
				out = append(out, q)
				left = slices.Delete(left, i, i+1)
				break
			}
		}
	}
	return out
}

func weightOf(q string, weights map[string]int) int {
	if w, ok := weights[q]; ok && w > 0 {
		return w
	}
	return 1
}
