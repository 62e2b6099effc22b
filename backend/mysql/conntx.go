package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"time"
)

// Statements that begin and end a transaction driven by inConnTx, sent in
// the same round trip as the transaction's first and last statements.
const (
	beginTx  = "START TRANSACTION; "
	commitTx = "; COMMIT"
)

// abortTimeout bounds the ROLLBACK of a failed inConnTx transaction.
const abortTimeout = 5 * time.Second

// inConnTx runs fn as one transaction on a connection of the pool that fn
// drives itself: its first statements begin with beginTx and its last end
// with commitTx (the driver sends several statements in one round trip),
// so a short transaction takes one round trip per step instead of two
// more for BEGIN and COMMIT. fn must commit before it returns nil. When fn
// returns an error the transaction is rolled back, or the connection
// dropped if that fails, so no connection goes back to the pool inside a
// transaction; the whole transaction runs again as inTx says.
func (s *store) inConnTx(ctx context.Context, fn func(c *sql.Conn) error) error {
	return s.retrying(ctx, func() error {
		c, err := s.db.Conn(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := fn(c); err != nil {
			abort(c)
			return err
		}
		return nil
	})
}

// abort rolls back c's transaction, or marks c broken so that the pool
// closes it (the server then rolls the transaction back).
func abort(c *sql.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), abortTimeout)
	defer cancel()
	if _, err := c.ExecContext(ctx, "ROLLBACK"); err != nil {
		c.Raw(func(any) error { return driver.ErrBadConn }) //nolint:errcheck // the error is the point
	}
}
