package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// migrationFiles holds the schema migrations, named NNNN_what.sql and
// applied in order. They are forward-only: a released file never changes;
// a change to the schema is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one numbered step of the schema.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations reads the embedded migrations in version order. Versions
// start at 1 and have no gaps.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("kyu/postgres: read migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("kyu/postgres: migration %q is not named NNNN_what.sql", e.Name())
		}
		b, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("kyu/postgres: read migration %q: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("kyu/postgres: migration %q: want version %d", m.name, i+1)
		}
	}
	return ms, nil
}

// SchemaVersion is the schema version this code reads and writes: the
// number of the last embedded migration.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// Migrate brings the store's schema to SchemaVersion, creating the schema
// if needed. Each migration runs in its own transaction together with the
// record of its version, under an advisory lock, so concurrent Migrate
// calls apply each step once and a failed step leaves the schema at the
// previous version. A schema at a newer version is refused
// (ErrSchemaNewer) and left alone.
func (s *store) Migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	for {
		done, err := s.migrateStep(ctx, ms)
		if err != nil || done {
			return err
		}
	}
}

// migrateStep applies the next migration, if any; done reports that the
// schema is at the latest version.
func (s *store) migrateStep(ctx context.Context, ms []migration) (done bool, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("kyu/postgres: migrate: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit this does nothing
	// One lock per schema name: hashtext is stable for a given text.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('kyu.migrate.' || $1::text))`, s.opts.Schema); err != nil {
		return false, fmt.Errorf("kyu/postgres: migrate: lock: %w", err)
	}
	stmts := []string{
		`CREATE SCHEMA IF NOT EXISTS ` + s.schema,
		`CREATE TABLE IF NOT EXISTS ` + s.schema + `.schema_versions (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL
		)`,
	}
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			return false, fmt.Errorf("kyu/postgres: migrate schema %s: %w", s.opts.Schema, err)
		}
	}
	current, err := readVersion(ctx, tx, s.schema)
	if err != nil {
		return false, err
	}
	latest := len(ms)
	switch {
	case current > latest:
		return false, fmt.Errorf("%w: schema %s is at version %d; this kyu knows versions up to %d",
			ErrSchemaNewer, s.opts.Schema, current, latest)
	case current == latest:
		return true, tx.Commit(ctx)
	}
	m := ms[current]
	s.log.Info("applying kyu schema migration", "schema", s.opts.Schema, "version", m.version, "name", m.name)
	if _, err := tx.Exec(ctx, strings.ReplaceAll(m.sql, "{{schema}}", s.schema)); err != nil {
		return false, fmt.Errorf("kyu/postgres: migration %s on schema %s: %w", m.name, s.opts.Schema, err)
	}
	// The applied-at time is a note for people, not part of the semantics.
	if _, err := tx.Exec(ctx, `INSERT INTO `+s.schema+`.schema_versions (version, name, applied_at) VALUES ($1, $2, $3)`,
		m.version, m.name, time.Now()); err != nil {
		return false, fmt.Errorf("kyu/postgres: record migration %s: %w", m.name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("kyu/postgres: commit migration %s: %w", m.name, err)
	}
	return false, nil
}

// readVersion returns the highest recorded schema version, 0 for none.
func readVersion(ctx context.Context, q pgx.Tx, schema string) (int, error) {
	var v int
	err := q.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+schema+`.schema_versions`).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("kyu/postgres: read schema version: %w", err)
	}
	return v, nil
}

// version reads the schema's recorded version; ErrNotMigrated when the
// schema or its version table does not exist.
func (s *store) version(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+s.schema+`.schema_versions`).Scan(&v)
	if err != nil {
		if isUndefinedTable(err) {
			return 0, fmt.Errorf("%w: schema %s has no kyu tables; run `kyu migrate` or open with AutoMigrate", ErrNotMigrated, s.opts.Schema)
		}
		return 0, fmt.Errorf("kyu/postgres: read schema version: %w", err)
	}
	return v, nil
}

// checkSchema refuses a schema at another version than this code's.
func (s *store) checkSchema(ctx context.Context) error {
	v, err := s.version(ctx)
	if err != nil {
		return err
	}
	latest := SchemaVersion()
	switch {
	case v > latest:
		return fmt.Errorf("%w: schema %s is at version %d; this kyu knows versions up to %d", ErrSchemaNewer, s.opts.Schema, v, latest)
	case v < latest:
		return fmt.Errorf("%w: schema %s is at version %d, this kyu needs %d; run `kyu migrate` or open with AutoMigrate",
			ErrNotMigrated, s.opts.Schema, v, latest)
	}
	return s.checkObjects(ctx)
}

// checkObjects refuses a schema whose recorded version is right but which
// lacks one of its tables or functions (dropped by hand, say).
func (s *store) checkObjects(ctx context.Context) error {
	// The tables and functions of the current version, as to_regclass and
	// to_regprocedure name them after the schema and a dot.
	objects := []struct{ kind, name string }{
		{"table", "jobs"},
		{"table", "unique_keys"},
		{"table", "queues"},
		{"table", "job_logs"},
		{"table", "counters"},
		{"table", "workers"},
		{"table", "queue_counters"},
		{"function", "take_unique_key(text, text, uuid, timestamptz, timestamptz)"},
		{"function", "lock_jids(bigint[], text[])"},
	}
	for _, o := range objects {
		fn := "to_regclass"
		if o.kind == "function" {
			fn = "to_regprocedure"
		}
		var found bool
		if err := s.pool.QueryRow(ctx, `SELECT `+fn+`($1) IS NOT NULL`, s.schema+"."+o.name).Scan(&found); err != nil {
			return fmt.Errorf("kyu/postgres: check schema %s: %w", s.opts.Schema, err)
		}
		if !found {
			return fmt.Errorf("%w: schema %s records version %d but has no %s %s; restore it, or migrate a fresh schema",
				ErrNotMigrated, s.opts.Schema, SchemaVersion(), o.kind, o.name)
		}
	}
	return nil
}
