package mysql

import (
	"errors"

	"github.com/go-sql-driver/mysql"
)

// Errors from Open and Migrate, for errors.Is; the returned error's text
// says more (the prefix, the versions, the server).
var (
	// ErrNotMigrated: the database holds no kyu tables with the store's
	// prefix, an older version of them, or a version whose tables are
	// incomplete, and Options.AutoMigrate is off. Run `kyu migrate`.
	ErrNotMigrated = errors.New("kyu/mysql: tables are not migrated")
	// ErrSchemaNewer: the tables were migrated by a newer kyu than this one.
	ErrSchemaNewer = errors.New("kyu/mysql: tables are newer than this kyu")
	// ErrUnsupportedServer: the server is not MySQL or MariaDB, or older
	// than MySQL 8.0 or MariaDB 10.6 (the first with SKIP LOCKED).
	ErrUnsupportedServer = errors.New("kyu/mysql: unsupported database server")
	// ErrBadURL: the URL does not name a MySQL database as this package
	// reads it.
	ErrBadURL = errors.New("kyu/mysql: bad URL")
	// ErrCorrupt: a stored row holds values kyu never writes (an unknown
	// state, a bad attempt record); the error says which job and which
	// field.
	ErrCorrupt = errors.New("kyu/mysql: stored job is corrupt")
)

// Server error numbers the store acts on.
const (
	errDupEntry        = 1062 // ER_DUP_ENTRY
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	errDeadlock        = 1213 // ER_LOCK_DEADLOCK
	errNoSuchTable     = 1146 // ER_NO_SUCH_TABLE
	errBadDB           = 1049 // ER_BAD_DB_ERROR
	errDupFieldName    = 1060 // ER_DUP_FIELDNAME
	errDupKeyName      = 1061 // ER_DUP_KEYNAME
)

// errNumber returns the server's error number in err, 0 for none.
func errNumber(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// retryable reports an error after which the whole transaction may run
// again: the server rolled it back (deadlock), or gave up waiting for a
// lock (the statement was rolled back; the store then rolls back the
// transaction), or a concurrent insert took a key first.
func retryable(err error) bool {
	switch errNumber(err) {
	case errDeadlock, errLockWaitTimeout, errDupEntry:
		return true
	}
	return false
}
