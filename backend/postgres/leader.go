package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/kyuhq/kyu/backend"
)

// leadSQL takes or renews a lease in one statement: it inserts the row,
// or updates it when the caller already holds it (renewal: the epoch
// stays) or nobody holds it live (a new term: the epoch counts on), and
// returns nothing when another holds it live. $1 name, $2 holder, $3
// now, $4 now+TTL.
const leadSQL = `INSERT INTO %s.leaders AS l (name, holder, epoch, expires_at)
VALUES ($1, $2, 1, $4)
ON CONFLICT (name) DO UPDATE SET
    epoch = CASE WHEN l.holder = excluded.holder AND l.expires_at > $3 THEN l.epoch ELSE l.epoch + 1 END,
    holder = excluded.holder,
    expires_at = excluded.expires_at
WHERE l.holder = excluded.holder OR l.holder = '' OR l.expires_at <= $3
RETURNING holder, epoch, expires_at`

// Lead takes or renews the lease p.Name for p.Holder, or reports who holds
// it (see backend.Leader): one statement, and a second to read the holder
// when another holds the lease.
func (s *store) Lead(ctx context.Context, p backend.LeadParams) (backend.Leadership, error) {
	if err := s.begin(ctx); err != nil {
		return backend.Leadership{}, err
	}
	defer s.end()
	l := backend.Leadership{Held: true}
	err := s.pool.QueryRow(ctx, s.inSchema(leadSQL), p.Name, p.Holder, p.Now, p.Now.Add(p.TTL)).Scan(&l.Holder, &l.Epoch, &l.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		// Another holds it live. Read it in a statement of its own, whose
		// snapshot sees the row the insert found (a row committed by a
		// racing Lead is not in the first statement's snapshot).
		l.Held = false
		err = s.pool.QueryRow(ctx, s.inSchema(`SELECT holder, epoch, expires_at FROM %s.leaders WHERE name = $1`), p.Name).Scan(&l.Holder, &l.Epoch, &l.ExpiresAt)
	}
	if err != nil {
		return backend.Leadership{}, s.wrap("lead "+p.Name, err)
	}
	l.ExpiresAt = l.ExpiresAt.UTC()
	return l, nil
}

// Resign gives up a lease p.Holder holds in term p.Epoch; the row stays,
// with its epoch.
func (s *store) Resign(ctx context.Context, p backend.ResignParams) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	_, err := s.pool.Exec(ctx, s.inSchema(`UPDATE %s.leaders SET holder = '' WHERE name = $1 AND holder = $2 AND epoch = $3`), p.Name, p.Holder, p.Epoch)
	if err != nil {
		return s.wrap("resign "+p.Name, err)
	}
	return nil
}

// inSchema fills the store's quoted schema into the %s of query.
func (s *store) inSchema(query string) string { return strings.ReplaceAll(query, "%s", s.schema) }
