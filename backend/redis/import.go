package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/kyuhq/kyu/backend"
)

// Import writes jobs with their history (see backend.Importer), one
// script run per queue (lua/import.lua), comparing at the store's
// millisecond precision.
//
// A job id made by this store carries its queue's number (ids.go); a job
// from another store has some other number there. Such a job gets an entry
// in the store-wide homes hash (id -> queue number), written before the
// job itself, and every call that names a job looks there when the number
// in the id does not lead to it (jobHome). The entry stays when the job is
// deleted (about 50 bytes).
func (s *store) Import(ctx context.Context, p backend.ImportParams) (backend.ImportResult, error) {
	if err := s.enter(); err != nil {
		return backend.ImportResult{}, err
	}
	res := backend.ImportResult{Items: make([]backend.ImportItem, len(p.Jobs))}
	var claims []jidClaim
	if s.keys.cluster {
		var err error
		if p, claims, err = s.importClaims(ctx, p, res.Items); err != nil {
			s.leave()
			return backend.ImportResult{}, err
		}
	}
	existing, err := s.importNew(ctx, p, res.Items)
	if claims != nil {
		ids := make([]string, len(claims))
		for k, c := range claims {
			for i, j := range p.Jobs {
				if j != nil && j.JID == c.jid && res.Items[i].Outcome == backend.ImportCreated {
					ids[k] = j.ID
				}
			}
		}
		if serr := s.settleJIDs(context.WithoutCancel(ctx), claims, ids); err == nil {
			err = serr
		}
	}
	s.leave()
	if err != nil {
		return backend.ImportResult{}, err
	}
	existing, err = s.importOrphans(ctx, p, existing, res.Items)
	if err != nil {
		return backend.ImportResult{}, err
	}
	for _, i := range existing {
		j := p.Jobs[i]
		old, err := s.Get(ctx, backend.GetParams{ID: j.ID})
		if err != nil {
			return backend.ImportResult{}, fmt.Errorf("kyu/redis: import: read job %s: %w", j.ID, err)
		}
		if f := backend.SameJobAt(old, j, time.Millisecond); f != "" {
			res.Items[i] = backend.ImportItem{Outcome: backend.ImportConflict, Reason: backend.ImportDiffers(j.ID, f)}
		} else {
			res.Items[i] = backend.ImportItem{Outcome: backend.ImportSame}
		}
	}
	return res, nil
}

// importOrphans writes the jobs among existing whose id has a home but no
// job: an import killed between recording the home and writing the job,
// or a job deleted since (its home stays). Their homes go and they are
// imported once more; it returns the positions that exist after all.
// Two imports of one such id at the same moment may both write it (the
// job's own record, in its own queue). On a Cluster a job with a JID is
// left as it was (its JID's reservation is settled already).
func (s *store) importOrphans(ctx context.Context, p backend.ImportParams, existing []int, items []backend.ImportItem) ([]int, error) {
	if len(existing) == 0 {
		return existing, nil
	}
	cmds := make(rueidis.Commands, len(existing))
	for k, i := range existing {
		cmds[k] = s.client.B().Hget().Key(s.keys.homes()).Field(p.Jobs[i].ID).Build()
	}
	var orphans []int
	kept := existing[:0:0]
	for k, r := range s.client.DoMulti(ctx, cmds...) {
		i := existing[k]
		if _, err := r.ToString(); rueidis.IsRedisNil(err) {
			kept = append(kept, i) // a job of the store's own numbering
			continue
		} else if err != nil {
			return nil, fmt.Errorf("kyu/redis: import: home of job %s: %w", p.Jobs[i].ID, err)
		}
		if s.keys.cluster && p.Jobs[i].JID != "" {
			kept = append(kept, i)
			continue
		}
		if _, err := s.Get(ctx, backend.GetParams{ID: p.Jobs[i].ID}); errors.Is(err, backend.ErrNotFound) {
			orphans = append(orphans, i)
		} else {
			kept = append(kept, i)
		}
	}
	if len(orphans) == 0 {
		return kept, nil
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	ids := make([]string, len(orphans))
	sub := backend.ImportParams{Jobs: make([]*backend.Job, len(p.Jobs)), Now: p.Now}
	for k, i := range orphans {
		ids[k] = p.Jobs[i].ID
		sub.Jobs[i] = p.Jobs[i]
	}
	if err := s.client.Do(ctx, s.client.B().Hdel().Key(s.keys.homes()).Field(ids...).Build()).Error(); err != nil {
		return nil, fmt.Errorf("kyu/redis: import: homes without jobs: %w", err)
	}
	again, err := s.importNew(ctx, sub, items)
	if err != nil {
		return nil, err
	}
	return append(kept, again...), nil
}

// importNew writes the jobs whose id is free and fills their items; it
// returns the positions of the jobs whose id exists.
func (s *store) importNew(ctx context.Context, p backend.ImportParams, items []backend.ImportItem) ([]int, error) {
	byQueue := map[string][]int{}
	var order []string
	for i, j := range p.Jobs {
		if j == nil {
			continue // settled already (importClaims)
		}
		if _, ok := byQueue[j.Queue]; !ok {
			order = append(order, j.Queue)
		}
		byQueue[j.Queue] = append(byQueue[j.Queue], i)
	}
	var existing []int
	for _, q := range order {
		ex, err := s.importQueue(ctx, q, byQueue[q], p, items)
		if err != nil {
			return nil, fmt.Errorf("kyu/redis: import into %s: %w", q, err)
		}
		existing = append(existing, ex...)
	}
	return existing, nil
}

// importQueue imports the jobs at pos, all of queue q. A job whose JID's
// index entry names a job gone takes the JID over, as an Enqueue does
// (holderState): the entry is deleted if it still names that job, and
// the job imported again, at most holderTries times in a row.
func (s *store) importQueue(ctx context.Context, q string, pos []int, p backend.ImportParams, items []backend.ImportItem) ([]int, error) {
	args := make(map[int][]string, len(pos))
	kept := pos[:0:0]
	for _, i := range pos {
		a, reason := importArgs(p.Jobs[i], p.Now)
		if reason != "" {
			items[i] = backend.ImportItem{Outcome: backend.ImportConflict, Reason: fmt.Sprintf("job %s: the Redis store cannot keep it: %s", p.Jobs[i].ID, reason)}
			continue
		}
		args[i] = a
		kept = append(kept, i)
	}
	pos = kept
	var existing []int
	for try := 1; ; try++ {
		ex, stale, err := s.importQueueOnce(ctx, q, pos, args, p, items)
		if err != nil {
			return nil, err
		}
		existing = append(existing, ex...)
		if len(stale) == 0 {
			return existing, nil
		}
		if try > holderTries {
			j := p.Jobs[stale[0]]
			return nil, fmt.Errorf("job %s: jid %q: its holder was gone again after %d takeovers; job not written", j.ID, j.JID, holderTries)
		}
		pos = stale
	}
}

// importQueueOnce runs the import script once for the jobs at pos (args
// their values): it returns the positions whose id exists, and those
// whose JID's index entry named a job gone, which it deleted (stale:
// not written, their items not set).
func (s *store) importQueueOnce(ctx context.Context, q string, pos []int, args map[int][]string, p backend.ImportParams, items []backend.ImportItem) (existing, stale []int, err error) {
	for try := 0; ; try++ {
		num, _, err := s.queues.number(ctx, q, true)
		if err != nil {
			return nil, nil, err
		}
		existing, write, checked, err := s.claimHomes(ctx, num, pos, p.Jobs)
		if err != nil {
			return nil, nil, err
		}
		if len(write) == 0 {
			return existing, nil, nil
		}
		argv := make([]string, 0, 5+5*len(write))
		argv = append(argv, ms(p.Now.UnixMilli()), s.keys.wakeChannel(q), strconv.Itoa(len(write)), q, strconv.Itoa(checked))
		for _, i := range write {
			argv = append(argv, args[i]...)
		}
		var reply rueidis.RedisResult
		err = s.retry(ctx, func(int) error {
			reply = s.eval(ctx, s.scripts.importJobs, s.keysOf(s.scripts.importJobs, num), argv)
			if err := reply.Error(); err != nil && !staleQueue(err) {
				return err
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		if err := reply.Error(); err != nil {
			if try >= 2 {
				return nil, nil, err
			}
			s.queues.forget(q)
			pos = write
			continue
		}
		parts, err := reply.ToArray()
		if err != nil || len(parts) != len(write) && len(parts) != 0 {
			return nil, nil, fmt.Errorf("unexpected reply %s", reply.String())
		}
		if len(parts) == 0 { // every job written
			for _, i := range write {
				items[i] = backend.ImportItem{Outcome: backend.ImportCreated}
			}
			return existing, nil, nil
		}
		var refused []string
		for k, part := range parts {
			i := write[k]
			j := p.Jobs[i]
			if code, err := part.AsInt64(); err == nil {
				switch code {
				case 0:
					items[i] = backend.ImportItem{Outcome: backend.ImportCreated}
				case 2:
					existing = append(existing, i)
				default:
					return nil, nil, fmt.Errorf("unexpected reply %s", reply.String())
				}
				continue
			}
			dup, err := part.ToArray()
			if err != nil || len(dup) != 2 {
				return nil, nil, fmt.Errorf("unexpected reply %s", reply.String())
			}
			holder, _ := dup[1].ToString()
			code, _ := dup[0].AsInt64()
			if n, _ := queueNumOf(j.ID); n != num {
				refused = append(refused, j.ID)
			}
			if code == 4 {
				gone, err := s.holderGone(ctx, num, j.JID, holder)
				if err != nil {
					return nil, nil, err
				}
				if gone {
					stale = append(stale, i)
					continue
				}
			}
			items[i] = backend.ImportItem{Outcome: backend.ImportConflict, HolderID: holder,
				Reason: backend.ImportKeyHeld(j.ID, j.Queue, j.UniqueKey, holder)}
			if code == 4 {
				items[i].Reason = backend.ImportJIDHeld(j.ID, j.JID, holder)
			}
		}
		if len(refused) > 0 {
			// The jobs refused were not written: their homes go (those
			// to import again record theirs again).
			if err := s.client.Do(ctx, s.client.B().Hdel().Key(s.keys.homes()).Field(refused...).Build()).Error(); err != nil {
				return nil, nil, err
			}
		}
		return existing, stale, nil
	}
}

// holderGone reports whether the job holder, which the JID index of the
// queue numbered num gives jid, is gone; if so it deletes the entry, if
// that still names it (see holderState).
func (s *store) holderGone(ctx context.Context, num uint32, jid, holder string) (bool, error) {
	_, err := s.getID(ctx, holder)
	if !errors.Is(err, backend.ErrNotFound) {
		if err != nil && !errors.Is(err, ErrCorrupt) {
			return false, fmt.Errorf("read the holder of jid %q: %w", jid, err)
		}
		return false, nil
	}
	if _, err := s.swapJIDs(ctx, s.keys.queue(num).jids(), []string{jid, holder, ""}); err != nil {
		return false, err
	}
	return true, nil
}

// claimHomes sorts the jobs at pos (of the queue numbered num) into those
// whose id exists elsewhere in the store (existing) and those the script
// is to write; for a job whose id carries another number it first records
// the job's home (lua/import_homes.lua), or finds that the id has one.
// The first checked jobs of write may exist in the queue; the rest are
// new to the store, since every job whose id carries another number has
// a home from before it was written.
func (s *store) claimHomes(ctx context.Context, num uint32, pos []int, jobs []*backend.Job) (existing, write []int, checked int, err error) {
	var foreign []int
	for _, i := range pos {
		if n, _ := queueNumOf(jobs[i].ID); n == num {
			write = append(write, i)
		} else {
			foreign = append(foreign, i)
		}
	}
	if len(foreign) == 0 {
		return nil, write, len(write), nil
	}
	// An id whose own number is a queue of this store may be that
	// queue's job: ask the jobs hash of the number in each such id (all
	// in one round trip). Queues are numbered from 1 up (register.lua),
	// so an id whose number is above the count of queues is no queue's;
	// ids from another store mostly are.
	count, err := s.client.Do(ctx, s.client.B().Hget().Key(s.keys.meta()).Field("queues").Build()).AsInt64()
	if err != nil && !rueidis.IsRedisNil(err) {
		return nil, nil, 0, err
	}
	cmds := make(rueidis.Commands, 0, len(foreign))
	var asked []int
	for _, i := range foreign {
		if n, _ := queueNumOf(jobs[i].ID); n >= 1 && int64(n) <= count {
			cmds = append(cmds, s.client.B().Hexists().Key(s.keys.queue(n).jobs()).Field(jobs[i].ID).Build())
			asked = append(asked, i)
		}
	}
	native := map[int]bool{}
	if len(cmds) > 0 {
		for k, r := range s.client.DoMulti(ctx, cmds...) {
			there, err := r.AsBool()
			if err != nil {
				return nil, nil, 0, err
			}
			native[asked[k]] = there
		}
	}
	args := []string{strconv.FormatUint(uint64(num), 10)}
	var claimed []int
	for _, i := range foreign {
		if native[i] {
			existing = append(existing, i)
			continue
		}
		args = append(args, jobs[i].ID)
		claimed = append(claimed, i)
	}
	if len(claimed) == 0 {
		return existing, write, len(write), nil
	}
	// Not retried: a run whose reply was lost has recorded the homes.
	sc := s.scripts.importHomes
	reply := s.eval(ctx, sc, sc.storeKeys(s.keys), args)
	if err := reply.Error(); err != nil {
		return nil, nil, 0, err
	}
	taken, err := reply.AsIntSlice()
	if err != nil {
		return nil, nil, 0, fmt.Errorf("homes: unexpected reply %s", reply.String())
	}
	checked = len(write)
	k := 0
	for c, i := range claimed {
		if k < len(taken) && taken[k] == int64(c+1) {
			existing = append(existing, i)
			k++
		} else {
			write = append(write, i)
		}
	}
	if k != len(taken) {
		return nil, nil, 0, fmt.Errorf("homes: unexpected reply %s", reply.String())
	}
	return existing, write, checked, nil
}

// jobHome finds the queue of an imported job whose id does not carry its
// queue's number (see Import); ok is false when there is none.
func (s *store) jobHome(ctx context.Context, id string) (num uint32, queue string, ok bool, err error) {
	v, err := s.client.Do(ctx, s.client.B().Hget().Key(s.keys.homes()).Field(id).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, fmt.Errorf("kyu/redis: find job %s: %w", id, err)
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, "", false, fmt.Errorf("%w: home of job %s: %q", ErrCorrupt, id, v)
	}
	queue, ok, err = s.queues.name(ctx, uint32(n))
	return uint32(n), queue, ok, err
}

// importArgs are the import script's values for one job (lua/import.lua:
// five, and one more per optional value the job has), or the reason the
// store cannot hold it.
func importArgs(j *backend.Job, now time.Time) ([]string, string) {
	cancel := ""
	switch {
	case j.CancelReason == "" && !j.CancelRequested:
	case j.CancelReason == "" || j.State != backend.StateCancelled:
		return nil, "a cancel request or reason on a job that is not cancelled"
	case j.CancelReason == backend.CancelReasonDeadline && !j.CancelRequested:
		cancel = "d"
	case j.CancelReason == backend.CancelReasonRequested && !j.CancelRequested:
		cancel = "r"
	case j.CancelReason == backend.CancelReasonRequested:
		cancel = "R"
	case j.CancelReason == backend.CancelReasonHandler && !j.CancelRequested:
		cancel = "h"
	default:
		return nil, fmt.Sprintf("cancel reason %q with a cancel request", j.CancelReason)
	}
	rec := *j
	if len(rec.Payload) == 0 {
		rec.Payload = nil
	}
	st := stateCode(j.State)
	score := ""
	switch j.State {
	case backend.StatePending:
		score = string(appendReadyScore(nil, j.Priority, j.RunAt.UnixMilli()))
	case backend.StateScheduled, backend.StateRetry:
		score = strconv.FormatInt(j.RunAt.UnixMilli(), 10)
	}
	deadline := ""
	if !j.Deadline.IsZero() && !j.State.Final() {
		deadline = strconv.FormatInt(j.Deadline.UnixMilli(), 10)
	}
	var uk, until string // no until: held until the job is final
	if backend.HoldsKey(j, now) {
		uk = j.UniqueKey
		if j.UniqueFor > 0 {
			until = strconv.FormatInt(j.CreatedAt.Add(j.UniqueFor).UnixMilli(), 10)
		}
	}
	var errs, prog, logs, counts, fin string
	if len(j.Errors) > 0 {
		st := make([]storedError, len(j.Errors))
		for i, e := range j.Errors {
			st[i] = storedError{Attempt: e.Attempt, At: e.At.UnixMilli(), Kind: e.Kind, Message: e.Message, Stack: e.Stack}
		}
		b, _ := json.Marshal(st)
		errs = string(b)
	}
	if j.Progress != nil {
		prog = encodeProgress(j.Progress, j.Progress.At)
	}
	if len(j.Logs) > 0 {
		lines := make([]storedLine, len(j.Logs))
		for i, l := range j.Logs {
			lines[i] = storedLine{At: l.At.UnixMilli(), Line: l.Line}
		}
		b, _ := json.Marshal(lines)
		logs = string(b)
	}
	if len(j.Logs) > 0 || j.LogsDropped > 0 {
		counts = strconv.Itoa(len(j.Logs)) + "|" + strconv.Itoa(j.LogsDropped)
	}
	if j.State.Final() && !j.ExpiresAt.IsZero() {
		fin = strconv.FormatInt(j.ExpiresAt.UnixMilli(), 10)
	}
	args := []string{j.ID, st, string(appendRecordCancel(nil, &rec, cancel, false)), score, ""}
	var opts []byte
	for _, o := range [...]struct {
		letter byte
		v      string
	}{{'d', deadline}, {'u', uk}, {'t', until}, {'e', errs}, {'r', string(j.Result)}, {'p', prog},
		{'l', logs}, {'n', counts}, {'f', fin}, {'j', j.JID}} {
		if o.v != "" {
			opts = append(opts, o.letter)
			args = append(args, o.v)
		}
	}
	args[4] = string(opts)
	return args, ""
}

// elsewhere returns the home of an imported job (jobHome) when it is not
// the queue numbered num, where the job was not found; ok is false when
// the job has no other home.
func (s *store) elsewhere(ctx context.Context, id string, num uint32) (uint32, string, bool, error) {
	h, q, ok, err := s.jobHome(ctx, id)
	if err != nil || !ok || h == num {
		return 0, "", false, err
	}
	return h, q, true, nil
}

// importClaims reserves the JIDs of p's jobs on a Cluster (see jid.go):
// a job whose JID another job holds gets its conflict in items, and
// leaves the returned p (its place nil). Each JID is reserved once: a
// second job of p with it meets the first in the queue's script, or
// finds it held when the first was written already.
func (s *store) importClaims(ctx context.Context, p backend.ImportParams, items []backend.ImportItem) (backend.ImportParams, []jidClaim, error) {
	seen := map[string]bool{}
	var jids []string
	for _, j := range p.Jobs {
		if j.JID != "" && !seen[j.JID] {
			seen[j.JID] = true
			jids = append(jids, j.JID)
		}
	}
	if len(jids) == 0 {
		return p, nil, nil
	}
	claims, err := s.reserveJIDs(ctx, jids)
	if err != nil {
		return p, nil, err
	}
	held := map[string]*backend.Job{}
	for _, c := range claims {
		if c.held != nil {
			held[c.jid] = c.held
		}
	}
	jobs := slices.Clone(p.Jobs)
	for i, j := range jobs {
		if h := held[j.JID]; j.JID != "" && h != nil && h.ID != j.ID {
			items[i] = backend.ImportItem{Outcome: backend.ImportConflict, HolderID: h.ID, Reason: backend.ImportJIDHeld(j.ID, j.JID, h.ID)}
			jobs[i] = nil
		}
	}
	p.Jobs = jobs
	return p, claims, nil
}
