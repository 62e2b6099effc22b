package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/redis/rueidis"
)

// JIDs (backend.NewJob.JID). A job's JID is in its record (the body's
// trailer, see bodyVersionJID) and in a JID index, JID -> id, which the
// scripts keep with the job: the enqueue and import scripts check it
// (before the unique key) and write it with the job, and remove (in
// lua/common.lua), which every script that deletes a job calls, frees the
// JID with the job.
//
// On one server (standalone or Sentinel) the index is the store-wide hash
// {P}:jids, which every queue's scripts take as a key beside the queue's
// own (a script may span slots there): a JID is unique across the store
// exactly, as atomic as the enqueue itself. A JID held by a job of another
// queue comes back from the script as that job's id, and Enqueue reads its
// state (holderStates).
//
// A Redis Cluster runs a script in one slot only. There the queue's
// scripts keep an index of their own, {P:N}:jids (a JID is unique within
// a queue exactly, and freed atomically with its job), and across queues
// an Enqueue or Import of jobs with JIDs first reserves each JID in
// {P}:jids (value "token|ms", reserveJIDs), writes the jobs, then marks
// each reservation with the id of the job written ("id|c") or drops it.
// An enqueue that finds a JID reserved by one on its way waits for it; a
// mark whose job no longer exists (it was deleted: the queue's script
// freed it, but cannot reach {P}:jids) is taken over. What Cluster does
// not give: a client that dies between reserving and writing leaves the
// JID held by no job until jidGrace has passed (Options.RetryFor plus ten
// seconds), and an enqueue slower than that may then write a job whose JID
// another job took over meanwhile.

// jidGrace is how long a reservation on a Cluster holds its JID before
// another enqueue may take it over (see above).
func (s *store) jidGrace() time.Duration { return s.opts.RetryFor + 10*time.Second }

// getJID reads the job a JID names.
func (s *store) getJID(ctx context.Context, jid string) (*backend.Job, error) {
	var v string
	err := s.retry(ctx, func(int) error {
		var err error
		v, err = s.client.Do(ctx, s.client.B().Hget().Key(s.keys.jids()).Field(jid).Build()).ToString()
		if rueidis.IsRedisNil(err) {
			v, err = "", nil
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("kyu/redis: get jid %q: %w", jid, err)
	}
	id, mark, _ := strings.Cut(v, "|")
	if id == "" || s.keys.cluster && mark != "c" {
		return nil, backend.ErrNotFound
	}
	j, err := s.getID(ctx, id)
	if err != nil {
		return nil, err
	}
	if j.JID != jid {
		// On a Cluster, the mark of a job since deleted.
		return nil, backend.ErrNotFound
	}
	return j, nil
}

// holderStates fills in the states of the jobs at pos of out: duplicates
// whose JID a job of another queue holds (the enqueue script reads no
// other queue's jobs).
func (s *store) holderStates(ctx context.Context, p backend.EnqueueParams, nows []time.Time, out []backend.EnqueuedJob, pos []int) error {
	for _, i := range pos {
		now := p.Now
		if nows != nil {
			now = nows[i]
		}
		if err := s.holderState(ctx, now, &p.Jobs[i], &out[i]); err != nil {
			return err
		}
	}
	return nil
}

// holderTries bounds how many times in a row holderState takes over a
// JID whose holder is gone and enqueues its job again.
const holderTries = 4

// holderState fills in the state of the holder of the JID of nj, whose
// enqueue (at now) found it held by the job out names. An index entry
// whose job is gone holds no JID: the deletion of a record whose body's
// trailer is damaged cannot read its JID to free it, and eviction or a
// hand may drop a record. Such an entry is deleted if it still names
// that job, atomically (jid swap on the index the queue's scripts read),
// and nj is enqueued again, so takes the JID (out then names it). A
// job's id is given to no other job (only an Import of that very job
// writes it again), so an entry still naming the job found gone is
// stale. Rather than loop, it fails when the holder is gone again after
// holderTries takeovers.
func (s *store) holderState(ctx context.Context, now time.Time, nj *backend.NewJob, out *backend.EnqueuedJob) error {
	for try := 1; ; try++ {
		j, err := s.getID(ctx, out.ID)
		if err == nil {
			out.State = j.State
			return nil
		}
		if !errors.Is(err, backend.ErrNotFound) {
			return fmt.Errorf("kyu/redis: enqueue: read the holder of jid %q: %w", nj.JID, err)
		}
		if try > holderTries {
			return fmt.Errorf("kyu/redis: enqueue: jid %q: its holder was gone again after %d takeovers; job not written", nj.JID, holderTries)
		}
		num, _, err := s.queues.number(ctx, nj.Queue, true)
		if err != nil {
			return err
		}
		if _, err := s.swapJIDs(ctx, s.keys.queue(num).jids(), []string{nj.JID, out.ID, ""}); err != nil {
			return err
		}
		one := backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{*nj}}
		r, elsewhere, err := s.enqueueOnce(ctx, one, nil, false)
		if err != nil {
			return err
		}
		*out = r.Jobs[0]
		if len(elsewhere) == 0 {
			return nil
		}
	}
}

// hasJID reports whether a job of jobs has a JID.
func hasJID(jobs []backend.NewJob) bool {
	for i := range jobs {
		if jobs[i].JID != "" {
			return true
		}
	}
	return false
}

// jidClaim is the outcome of reserving one JID on a Cluster: the
// reservation's value, or the job holding it.
type jidClaim struct {
	jid   string
	value string // "token|ms" when reserved
	held  *backend.Job
}

// reserveJIDs reserves the JIDs (each once, none empty) in the store-wide
// index on a Cluster (see the top of this file): each claim is reserved
// or names the job that holds its JID. It waits for reservations of
// enqueues on their way, for at most jidGrace each.
func (s *store) reserveJIDs(ctx context.Context, jids []string) ([]jidClaim, error) {
	out := make([]jidClaim, len(jids))
	todo := make([]int, len(jids))
	for i, jid := range jids {
		out[i].jid = jid
		todo[i] = i
	}
	tok := make([]byte, 8)
	rand.Read(tok)
	token := hex.EncodeToString(tok)
	wait := 2 * time.Millisecond
	for len(todo) > 0 {
		now := time.Now().UnixMilli()
		value := token + "|" + strconv.FormatInt(now, 10)
		args := make([]string, 0, 1+len(todo))
		args = append(args, value)
		for _, i := range todo {
			args = append(args, out[i].jid)
		}
		reply, err := s.jidScript(ctx, s.scripts.jidReserve, s.keys.jids(), args)
		if err != nil {
			return nil, err
		}
		vals, err := reply.AsStrSlice()
		if err != nil || len(vals) != len(todo) {
			return nil, fmt.Errorf("kyu/redis: reserve jids: unexpected reply %s", reply.String())
		}
		var again []int
		var swaps []string
		var swapped []int
		for k, i := range todo {
			v := vals[k]
			if v == "" {
				out[i].value = value
				continue
			}
			holder, mark, _ := strings.Cut(v, "|")
			if mark == "c" {
				j, err := s.getID(ctx, holder)
				switch {
				case err == nil && j.JID == out[i].jid:
					out[i].held = j
					continue
				case err != nil && !errors.Is(err, backend.ErrNotFound):
					return nil, err
				}
			} else if at, err := strconv.ParseInt(mark, 10, 64); err == nil && now-at < s.jidGrace().Milliseconds() {
				again = append(again, i) // an enqueue on its way
				continue
			}
			// The holder is gone (or its client died): take the JID over.
			swaps = append(swaps, out[i].jid, v, value)
			swapped = append(swapped, i)
		}
		if len(swaps) > 0 {
			ok, err := s.swapJIDs(ctx, s.keys.jids(), swaps)
			if err != nil {
				return nil, err
			}
			for k, i := range swapped {
				if ok[k] {
					out[i].value = value
				} else {
					again = append(again, i)
				}
			}
		}
		todo = again
		if len(todo) > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				s.releaseJIDs(context.WithoutCancel(ctx), out)
				return nil, fmt.Errorf("kyu/redis: waiting for an enqueue of the same jid: %w", ctx.Err())
			case <-t.C:
			}
			wait = min(2*wait, 100*time.Millisecond)
		}
	}
	return out, nil
}

// settleJIDs ends the reservations of claims: one whose job was written
// (ids[k] not "") is marked with the job's id, the others dropped.
func (s *store) settleJIDs(ctx context.Context, claims []jidClaim, ids []string) error {
	var swaps []string
	for k, c := range claims {
		if c.value == "" {
			continue
		}
		next := ""
		if ids[k] != "" {
			next = ids[k] + "|c"
		}
		swaps = append(swaps, c.jid, c.value, next)
	}
	if len(swaps) == 0 {
		return nil
	}
	ok, err := s.swapJIDs(ctx, s.keys.jids(), swaps)
	if err != nil {
		return err
	}
	for k, done := range ok {
		if !done {
			s.log.Warn("a jid reservation was taken over before its job was written; the jid may be held twice", "jid", swaps[3*k])
		}
	}
	return nil
}

// releaseJIDs drops the reservations of claims, as far as it can.
func (s *store) releaseJIDs(ctx context.Context, claims []jidClaim) {
	if err := s.settleJIDs(ctx, claims, make([]string, len(claims))); err != nil {
		s.log.Warn("drop jid reservations", "err", err)
	}
}

// swapJIDs sets each JID of swaps (triples: jid, expected value, new
// value, "" to delete) in the JID index named index whose value is the
// one expected; ok says which.
func (s *store) swapJIDs(ctx context.Context, index string, swaps []string) ([]bool, error) {
	reply, err := s.jidScript(ctx, s.scripts.jidSwap, index, swaps)
	if err != nil {
		return nil, err
	}
	vals, err := reply.AsIntSlice()
	if err != nil || len(vals) != len(swaps)/3 {
		return nil, fmt.Errorf("kyu/redis: swap jids: unexpected reply %s", reply.String())
	}
	ok := make([]bool, len(vals))
	for i, v := range vals {
		ok[i] = v == 1
	}
	return ok, nil
}

// jidScript runs a script on the JID index named index: the store-wide
// one, or a queue's on a Cluster.
func (s *store) jidScript(ctx context.Context, sc *script, index string, args []string) (rueidis.RedisResult, error) {
	var reply rueidis.RedisResult
	err := s.retry(ctx, func(int) error {
		reply = s.eval(ctx, sc, []string{index}, args)
		return reply.Error()
	})
	if err != nil {
		return reply, fmt.Errorf("kyu/redis: %s: %w", sc.name, err)
	}
	return reply, nil
}

// enqueueClusterJIDs is Enqueue on a Cluster of jobs some of which have a
// JID: it reserves their JIDs store-wide first (see the top of this file).
func (s *store) enqueueClusterJIDs(ctx context.Context, p backend.EnqueueParams) (backend.EnqueueResult, error) {
	first := map[string]int{} // JID -> the first job of p with it
	var jids []string
	for i, nj := range p.Jobs {
		if _, ok := first[nj.JID]; nj.JID != "" && !ok {
			first[nj.JID] = i
			jids = append(jids, nj.JID)
		}
	}
	claims, err := s.reserveJIDs(ctx, jids)
	if err != nil {
		return backend.EnqueueResult{}, err
	}
	claimOf := make(map[string]int, len(claims))
	for k, c := range claims {
		claimOf[c.jid] = k
	}
	res := backend.EnqueueResult{Jobs: make([]backend.EnqueuedJob, len(p.Jobs))}
	var write []int
	sub := backend.EnqueueParams{Now: p.Now}
	for i, nj := range p.Jobs {
		if nj.JID != "" {
			if h := claims[claimOf[nj.JID]].held; h != nil {
				res.Jobs[i] = backend.EnqueuedJob{ID: h.ID, State: h.State, Duplicate: true}
				continue
			}
			if first[nj.JID] != i {
				continue // after the job it follows is written
			}
		}
		write = append(write, i)
		sub.Jobs = append(sub.Jobs, nj)
	}
	ids := make([]string, len(claims))
	if len(sub.Jobs) > 0 {
		r, err := s.enqueue(ctx, sub, nil, false)
		if err != nil {
			s.releaseJIDs(context.WithoutCancel(ctx), claims)
			return backend.EnqueueResult{}, err
		}
		for k, i := range write {
			res.Jobs[i] = r.Jobs[k]
			if jid := p.Jobs[i].JID; jid != "" && !r.Jobs[k].Duplicate {
				ids[claimOf[jid]] = r.Jobs[k].ID
			}
		}
	}
	// A later job with a JID of the call is a duplicate of the first job
	// with it, if that was written; if not (its unique key was held), the
	// later ones go again, in order, once its reservation is dropped.
	var later []int
	rest := backend.EnqueueParams{Now: p.Now}
	for i, nj := range p.Jobs {
		f, ok := first[nj.JID]
		if !ok || f == i || claims[claimOf[nj.JID]].held != nil {
			continue
		}
		if ids[claimOf[nj.JID]] == "" {
			later = append(later, i)
			rest.Jobs = append(rest.Jobs, nj)
			continue
		}
		res.Jobs[i] = backend.EnqueuedJob{ID: res.Jobs[f].ID, State: res.Jobs[f].State, Duplicate: true}
	}
	if err := s.settleJIDs(context.WithoutCancel(ctx), claims, ids); err != nil {
		return backend.EnqueueResult{}, err
	}
	if len(later) > 0 {
		r, err := s.enqueueClusterJIDs(ctx, rest)
		if err != nil {
			return backend.EnqueueResult{}, err
		}
		for k, i := range later {
			res.Jobs[i] = r.Jobs[k]
		}
	}
	return res, nil
}

// jidsLater lists the jobs that share a JID with an earlier job of
// another queue, or with such a job: a call writes its queues' jobs queue
// by queue, so these go in a call after the others (enqueueInTurn), and
// the first job of the call with a JID takes it, as the memory store
// does. nil when there are none.
func jidsLater(jobs []backend.NewJob) []int {
	firstQueue := map[string]string{}
	deferred := map[string]bool{}
	var later []int
	for i, nj := range jobs {
		if nj.JID == "" {
			continue
		}
		q, seen := firstQueue[nj.JID]
		switch {
		case !seen:
			firstQueue[nj.JID] = nj.Queue
		case deferred[nj.JID] || q != nj.Queue:
			deferred[nj.JID] = true
			later = append(later, i)
		}
	}
	return later
}

// enqueueInTurn writes the jobs of p but those at later, then those (see
// jidsLater); the two calls are atomic each, not together.
func (s *store) enqueueInTurn(ctx context.Context, p backend.EnqueueParams, later []int) (backend.EnqueueResult, error) {
	first := backend.EnqueueParams{Now: p.Now}
	second := backend.EnqueueParams{Now: p.Now}
	var firstPos []int
	k := 0
	for i, nj := range p.Jobs {
		if k < len(later) && later[k] == i {
			second.Jobs = append(second.Jobs, nj)
			k++
			continue
		}
		first.Jobs = append(first.Jobs, nj)
		firstPos = append(firstPos, i)
	}
	res := backend.EnqueueResult{Jobs: make([]backend.EnqueuedJob, len(p.Jobs))}
	r, err := s.enqueue(ctx, first, nil, false)
	if err != nil {
		return backend.EnqueueResult{}, err
	}
	for k, i := range firstPos {
		res.Jobs[i] = r.Jobs[k]
	}
	if later := jidsLater(second.Jobs); later != nil {
		r, err = s.enqueueInTurn(ctx, second, later)
	} else {
		r, err = s.enqueue(ctx, second, nil, false)
	}
	if err != nil {
		return backend.EnqueueResult{}, err
	}
	for k, i := range later {
		res.Jobs[i] = r.Jobs[k]
	}
	return res, nil
}
