package mysql

import (
	"context"
	"fmt"

	"github.com/kyuhq/kyu/backend"
)

// A job's JID is unique among the prefix's jobs while the job exists: the
// jobs table has a unique key on it, and a job without a JID has none
// (NULL). Enqueue and Import read the holders of the JIDs they are given
// in the transaction that writes the jobs, and answer a held JID as a
// duplicate of, or a conflict with, its holder. Two transactions that
// write one new JID at once meet at the unique key: the second waits for
// the first, and when the first commits it fails with a duplicate key
// (1062) and runs again, now reading the first's job (the store's
// connections read at READ COMMITTED). The read takes no lock: a locking
// read would hold the holder's row, and so keep its worker from finishing
// it, until the transaction ends, which in EnqueueTx is the caller's.

// jidHolder is the job that holds a JID.
type jidHolder struct {
	id    string
	state backend.State
}

// jidChunk bounds the JIDs of one read of holders.
const jidChunk = 500

// jidHolders reads the jobs that hold jids.
func (s *store) jidHolders(ctx context.Context, q queryer, jids []string) (map[string]jidHolder, error) {
	held := map[string]jidHolder{}
	for len(jids) > 0 {
		n := min(len(jids), jidChunk)
		args := make([]any, n)
		for i, jid := range jids[:n] {
			args[i] = []byte(jid)
		}
		jids = jids[n:]
		if err := s.readJIDHolders(ctx, q, args, held); err != nil {
			return nil, fmt.Errorf("jids: %w", err)
		}
	}
	return held, nil
}

// readJIDHolders adds the holders of the JIDs args to held.
func (s *store) readJIDHolders(ctx context.Context, q queryer, args []any, held map[string]jidHolder) error {
	rows, err := q.QueryContext(ctx, fmt.Sprintf(s.sqls.jidHolders, placeholders(len(args))), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var jid []byte
		var id, state string
		if err := rows.Scan(&jid, &id, &state); err != nil {
			return err
		}
		held[string(jid)] = jidHolder{id: id, state: backend.State(state)}
	}
	return rows.Err()
}

// planJIDs lists the JIDs of jobs, in their order.
func planJIDs(jobs []*backend.Job) []string {
	var out []string
	for _, j := range jobs {
		if j.JID != "" {
			out = append(out, j.JID)
		}
	}
	return out
}
