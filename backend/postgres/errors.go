package postgres

import "errors"

// Errors from Open and Migrate, for errors.Is; the returned error's text
// says more (the schema, the versions, the server).
var (
	// ErrNotMigrated: the schema holds no kyu tables, or an older version
	// of them, and Options.AutoMigrate is off. Run `kyu migrate`.
	ErrNotMigrated = errors.New("kyu/postgres: schema is not migrated")
	// ErrSchemaNewer: the schema was migrated by a newer kyu than this one.
	ErrSchemaNewer = errors.New("kyu/postgres: schema is newer than this kyu")
	// ErrUnsupportedServer: the server is not PostgreSQL, or older than
	// MinServerVersion.
	ErrUnsupportedServer = errors.New("kyu/postgres: unsupported database server")
	// ErrBadURL: the URL does not name a PostgreSQL database as this
	// package reads it.
	ErrBadURL = errors.New("kyu/postgres: bad URL")
)

// ErrCorrupt: a stored row holds values kyu never writes (an unknown state,
// a bad attempt record); the error says which job and which field.
var ErrCorrupt = errors.New("kyu/postgres: stored job is corrupt")
