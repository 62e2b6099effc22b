package mysql

import (
	"context"
	"database/sql"
	"errors"

	"github.com/kyuhq/kyu/backend"
)

// Lead takes or renews the lease p.Name for p.Holder, or reports who holds
// it (see backend.Leader): one transaction reads the lease's row under a
// lock (SELECT … FOR UPDATE, which also locks the gap of a row not there
// yet), applies backend.NextLeadership and writes the answer when it is
// Held. Two racing first takes may deadlock on the gap; the loser runs
// again and finds the winner's row.
func (s *store) Lead(ctx context.Context, p backend.LeadParams) (backend.Leadership, error) {
	if err := s.begin(ctx); err != nil {
		return backend.Leadership{}, err
	}
	defer s.end()
	var l backend.Leadership
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		cur, found, err := s.lockLease(ctx, tx, p.Name)
		if err != nil {
			return err
		}
		l = backend.NextLeadership(cur, p)
		switch {
		case !l.Held:
			return nil
		case found:
			_, err = tx.ExecContext(ctx, `UPDATE `+s.table("leaders")+` SET holder = ?, epoch = ?, expires_at = ? WHERE name = ?`,
				l.Holder, l.Epoch, micros(l.ExpiresAt), p.Name)
		default:
			_, err = tx.ExecContext(ctx, `INSERT INTO `+s.table("leaders")+` (name, holder, epoch, expires_at) VALUES (?, ?, ?, ?)`,
				p.Name, l.Holder, l.Epoch, micros(l.ExpiresAt))
		}
		return err
	})
	if err != nil {
		return backend.Leadership{}, s.wrap("lead "+p.Name, err)
	}
	l.ExpiresAt = fromMicros(micros(l.ExpiresAt))
	return l, nil
}

// Resign gives up a lease p.Holder holds in term p.Epoch; the row stays,
// with its epoch, and an empty holder.
func (s *store) Resign(ctx context.Context, p backend.ResignParams) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		cur, found, err := s.lockLease(ctx, tx, p.Name)
		if err != nil || !found {
			return err
		}
		next, ok := backend.ResignedLeadership(cur, p)
		if !ok {
			return nil
		}
		// A lease nobody holds has no expiry: 0 stands for none.
		_, err = tx.ExecContext(ctx, `UPDATE `+s.table("leaders")+` SET holder = ?, epoch = ?, expires_at = 0 WHERE name = ?`,
			next.Holder, next.Epoch, p.Name)
		return err
	})
	return s.wrap("resign "+p.Name, err)
}

// lockLease reads the lease name under a lock held until tx ends: the
// zero Leadership and found false when it was never taken. A resigned
// lease has an empty holder and keeps its epoch.
func (s *store) lockLease(ctx context.Context, tx *sql.Tx, name string) (backend.Leadership, bool, error) {
	var l backend.Leadership
	var holder []byte
	var expires int64
	err := tx.QueryRowContext(ctx, `SELECT holder, epoch, expires_at FROM `+s.table("leaders")+` WHERE name = ? FOR UPDATE`, name).
		Scan(&holder, &l.Epoch, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return backend.Leadership{}, false, nil
	}
	if err != nil {
		return backend.Leadership{}, false, err
	}
	l.Holder = string(holder)
	if l.Holder != "" {
		l.ExpiresAt = fromMicros(expires)
	}
	return l, true, nil
}
