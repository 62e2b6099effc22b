package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kyuhq/kyu/backend"
)

// A job's JID is unique in the schema while the job exists: the jobs
// table has a unique index on it, and a job without a JID has none (NULL).
// Enqueue and Import answer a held JID as a duplicate of, or a conflict
// with, its holder rather than with the index's error: before they write,
// they take an advisory lock per JID and read the holders (lock_jids), in
// the transaction that writes the jobs, so that of two transactions with
// one JID the second reads the first's job once the first commits.

// jidRef is item i of plan.
type jidRef struct {
	plan *enqueuePlan
	i    int
}

// sqlLockJIDs: $1 the advisory lock keys in order, $2 the JIDs. Returns
// (jid, holder id, holder state) per JID held.
const sqlLockJIDs = `SELECT jid, holder::text, holder_state FROM {{s}}.lock_jids($1::bigint[], $2::text[])`

// sqlGetJID: $1 jid. sqlGet for the job with that JID.
const sqlGetJID = `SELECT {{cols j}}, (SELECT json_agg(json_build_object('at', l.at, 'line', l.line) ORDER BY l.seq)
	FROM {{s}}.job_logs l WHERE l.job_id = j.id)
FROM {{s}}.jobs j WHERE j.jid = $1`

// jidHolder is the job that holds a JID.
type jidHolder struct {
	id    string
	state backend.State
}

// jidLockKey is the advisory lock key of jid in the store's schema: a
// stable 64-bit hash of both, the same in every process.
func (s *store) jidLockKey(jid string) int64 {
	h := fnv.New64a()
	h.Write([]byte("kyu.jid\x00" + s.opts.Schema + "\x00" + jid))
	return int64(h.Sum64())
}

// lockJIDs locks jids (any order, repeats allowed) in the transaction r
// and returns their holders.
func (s *store) lockJIDs(ctx context.Context, r runner, jids []string) (map[string]jidHolder, error) {
	keys := make([]int64, 0, len(jids))
	for _, jid := range jids {
		keys = append(keys, s.jidLockKey(jid))
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	held := map[string]jidHolder{}
	err := r.run(ctx, s.sqls.lockJIDs, []any{keys, jids}, func(scan func(...any) error) error {
		var jid, id string
		var state pgtype.Text
		if err := scan(&jid, &id, &state); err != nil {
			return err
		}
		held[jid] = jidHolder{id: id, state: backend.State(state.String)}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("jids: %w", err)
	}
	return held, nil
}

// takeJIDs checks the JIDs of the plans, one caller's or a coalesced
// group's in order, within the transaction r that writes them: an item
// whose JID a job holds becomes a duplicate of that job; a later item
// with an earlier item's JID waits in sameJID for settle. The JIDs stay
// locked until r ends, so no one else writes them meanwhile. The plans'
// unique keys are worked out again without the duplicates.
func (s *store) takeJIDs(ctx context.Context, r runner, plans []*enqueuePlan) error {
	var jids []string
	for _, p := range plans {
		for _, j := range p.jobs {
			if j.JID != "" {
				jids = append(jids, j.JID)
			}
		}
	}
	if len(jids) == 0 {
		return nil
	}
	held, err := s.lockJIDs(ctx, r, jids)
	if err != nil {
		return err
	}
	first := map[string]jidRef{}
	for _, p := range plans {
		p.sameJID = nil
		dups := false
		for i, j := range p.jobs {
			if j.JID == "" {
				continue
			}
			if h, ok := held[j.JID]; ok {
				p.res[i] = backend.EnqueuedJob{ID: h.id, State: h.state, Duplicate: true}
				dups = true
				continue
			}
			if f, ok := first[j.JID]; ok {
				if p.sameJID == nil {
					p.sameJID = map[int]jidRef{}
				}
				p.sameJID[i] = f
				p.res[i] = backend.EnqueuedJob{Duplicate: true} // settled later
				dups = true
				continue
			}
			first[j.JID] = jidRef{p, i}
		}
		if dups {
			p.indexKeys()
		}
	}
	return nil
}
