package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// The oldest servers this package runs on: the first releases with
// FOR UPDATE SKIP LOCKED. (It is tested on MariaDB 10.11 only.)
const (
	MinMySQL   = "8.0"
	MinMariaDB = "10.6"
)

// server is what checkServer learnt about the server.
type server struct {
	mariadb bool
	version string // as the server gives it
}

// isolationVar is the session variable that sets the isolation level:
// MySQL 8 dropped tx_isolation; MariaDB knows only it before 11.1.
func (sv server) isolationVar() string {
	if sv.mariadb {
		return "tx_isolation"
	}
	return "transaction_isolation"
}

// checkServer refuses a server that is not MySQL or MariaDB, or too old.
func checkServer(ctx context.Context, db *sql.DB, dbName string) (server, error) {
	var version, comment string
	err := db.QueryRowContext(ctx, `SELECT VERSION(), @@version_comment`).Scan(&version, &comment)
	if err != nil {
		return server{}, connectError(err, dbName)
	}
	return parseServer(version, comment)
}

// parseServer reads VERSION() and @@version_comment.
func parseServer(version, comment string) (server, error) {
	v := strings.TrimPrefix(version, "5.5.5-") // old MariaDB handshakes
	sv := server{version: version, mariadb: strings.Contains(strings.ToLower(v+" "+comment), "mariadb")}
	lower := strings.ToLower(v + " " + comment)
	for _, other := range []string{"tidb", "vitess", "singlestore", "memsql"} {
		if strings.Contains(lower, other) {
			return server{}, fmt.Errorf("%w: the server says it is %q (%s), not MySQL or MariaDB", ErrUnsupportedServer, version, comment)
		}
	}
	major, minor, ok := majorMinor(v)
	if !ok {
		return server{}, fmt.Errorf("%w: cannot read the server's version %q", ErrUnsupportedServer, version)
	}
	switch {
	case sv.mariadb && (major < 10 || major == 10 && minor < 6):
		return server{}, fmt.Errorf("%w: MariaDB %d.%d (%s) is older than the minimum, %s (the first with SKIP LOCKED)", ErrUnsupportedServer, major, minor, version, MinMariaDB)
	case !sv.mariadb && major < 8:
		return server{}, fmt.Errorf("%w: MySQL %d.%d (%s) is older than the minimum, %s (the first with SKIP LOCKED)", ErrUnsupportedServer, major, minor, version, MinMySQL)
	}
	return sv, nil
}

// majorMinor reads "10.11.19-MariaDB..." as 10 and 11.
func majorMinor(v string) (major, minor int, ok bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	digits := parts[1]
	for i, c := range digits {
		if c < '0' || c > '9' {
			digits = digits[:i]
			break
		}
	}
	minor, err2 := strconv.Atoi(digits)
	return major, minor, err1 == nil && err2 == nil
}

// connectError explains a failure of the first statement on a new
// connection: a missing database, refused credentials, or a peer that does
// not speak MySQL's protocol.
func connectError(err error, dbName string) error {
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me) && me.Number == errBadDB:
		return fmt.Errorf("kyu/mysql: database %q does not exist; create it first (CREATE DATABASE `%s` CHARACTER SET utf8mb4): %w", dbName, dbName, err)
	case errors.As(err, &me):
		return fmt.Errorf("kyu/mysql: connect: %w", err)
	case errors.Is(err, mysql.ErrMalformPkt), errors.Is(err, mysql.ErrInvalidConn), errors.Is(err, mysql.ErrOldProtocol),
		errors.Is(err, mysql.ErrPktSync), errors.Is(err, mysql.ErrPktSyncMul):
		return fmt.Errorf("%w: the server did not answer as MySQL or MariaDB do (%v)", ErrUnsupportedServer, err)
	}
	return fmt.Errorf("kyu/mysql: connect: %w", err)
}
