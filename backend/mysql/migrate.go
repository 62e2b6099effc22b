package mysql

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// migrationFiles holds the schema migrations, named NNNN_what.sql and
// applied in order. They are forward-only: a released file never changes;
// a change to the tables is a new file.
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
		return nil, fmt.Errorf("kyu/mysql: read migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("kyu/mysql: migration %q is not named NNNN_what.sql", e.Name())
		}
		b, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("kyu/mysql: read migration %q: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("kyu/mysql: migration %q: want version %d", m.name, i+1)
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

// statementsOf splits a migration into its statements: they end with a
// semicolon at the end of a line; lines starting with -- are comments.
func statementsOf(script string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(script, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "--") || t == "" {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(t, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if strings.TrimSpace(cur.String()) != "" {
		out = append(out, cur.String())
	}
	return out
}

// Migrate brings the store's tables to SchemaVersion. MySQL commits each
// table definition on its own, so a step cannot be one transaction as in
// PostgreSQL: every statement of a migration can run again (CREATE TABLE
// IF NOT EXISTS; an ALTER TABLE that adds a column or a key that exists is
// taken as done), a step's version is recorded after all of
// its statements succeeded, and a step cut short (a crash, a lost
// connection) is completed by the next Migrate. Concurrent Migrate calls
// take turns under a named lock of the database (GET_LOCK). Tables at a
// newer version are refused (ErrSchemaNewer) and left alone.
func (s *store) Migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("kyu/mysql: migrate: %w", err)
	}
	defer conn.Close()
	lock := "kyu.migrate." + s.dbName + "." + s.opts.Prefix
	if len(lock) > 64 {
		lock = lock[:64]
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(?, 60)`, lock).Scan(&got); err != nil {
		return fmt.Errorf("kyu/mysql: migrate: lock: %w", err)
	}
	if !got.Valid || got.Int64 != 1 {
		return fmt.Errorf("kyu/mysql: migrate: another migration of prefix %s held the lock for a minute", s.opts.Prefix)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT RELEASE_LOCK(?)`, lock) //nolint:errcheck // the lock also ends with the connection
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+s.table("schema_versions")+` (
		version    INT NOT NULL PRIMARY KEY,
		name       VARCHAR(255) NOT NULL,
		applied_at BIGINT NOT NULL
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`); err != nil {
		return fmt.Errorf("kyu/mysql: migrate prefix %s: %w", s.opts.Prefix, err)
	}
	var current int
	if err := conn.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM `+s.table("schema_versions")).Scan(&current); err != nil {
		return fmt.Errorf("kyu/mysql: read schema version: %w", err)
	}
	if current > len(ms) {
		return fmt.Errorf("%w: prefix %s is at version %d; this kyu knows versions up to %d", ErrSchemaNewer, s.opts.Prefix, current, len(ms))
	}
	for _, m := range ms[current:] {
		s.log.Info("applying kyu schema migration", "prefix", s.opts.Prefix, "version", m.version, "name", m.name)
		for _, stmt := range statementsOf(strings.ReplaceAll(m.sql, "{{p}}", s.opts.Prefix)) {
			if err := execMigration(ctx, conn, stmt); err != nil {
				return fmt.Errorf("kyu/mysql: migration %s on prefix %s: %w", m.name, s.opts.Prefix, err)
			}
		}
		// The applied-at time is a note for people, not part of the semantics.
		if _, err := conn.ExecContext(ctx, `INSERT INTO `+s.table("schema_versions")+` (version, name, applied_at) VALUES (?, ?, ?)`,
			m.version, m.name, time.Now().UnixMicro()); err != nil {
			return fmt.Errorf("kyu/mysql: record migration %s: %w", m.name, err)
		}
	}
	// A table lost after its migration (dropped by hand) is created
	// again, empty, by the CREATE TABLE IF NOT EXISTS of its migration,
	// and given the columns and keys later migrations added to it.
	missing, err := s.missingTables(ctx)
	if err != nil || len(missing) == 0 {
		return err
	}
	s.log.Warn("creating missing kyu tables again", "prefix", s.opts.Prefix, "tables", missing)
	for _, m := range ms {
		for _, stmt := range statementsOf(strings.ReplaceAll(m.sql, "{{p}}", s.opts.Prefix)) {
			t := strings.TrimSpace(stmt)
			if !strings.HasPrefix(t, "CREATE TABLE IF NOT EXISTS") && !strings.HasPrefix(t, "ALTER TABLE") {
				continue
			}
			if err := execMigration(ctx, conn, stmt); err != nil {
				return fmt.Errorf("kyu/mysql: migration %s on prefix %s: %w", m.name, s.opts.Prefix, err)
			}
		}
	}
	return nil
}

// execMigration runs one statement of a migration. An ALTER TABLE that
// adds a column or a key which exists already (the step ran this far
// before, and was cut short) is done.
func execMigration(ctx context.Context, conn *sql.Conn, stmt string) error {
	_, err := conn.ExecContext(ctx, stmt)
	if err != nil && strings.HasPrefix(strings.TrimSpace(stmt), "ALTER TABLE") {
		switch errNumber(err) {
		case errDupFieldName, errDupKeyName:
			return nil
		}
	}
	return err
}

// version reads the recorded version; ErrNotMigrated when the version
// table does not exist.
func (s *store) version(ctx context.Context) (int, error) {
	var v int
	err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM `+s.table("schema_versions")).Scan(&v)
	if err != nil {
		if errNumber(err) == errNoSuchTable {
			return 0, fmt.Errorf("%w: database %s has no kyu tables with prefix %s; run `kyu migrate` or open with AutoMigrate", ErrNotMigrated, s.dbName, s.opts.Prefix)
		}
		return 0, fmt.Errorf("kyu/mysql: read schema version: %w", err)
	}
	return v, nil
}

// tables are the tables of the current version.
var tables = []string{"jobs", "unique_keys", "queues", "job_logs", "counters", "final_counts", "signals", "workers", "leaders", "queue_counters"}

// checkSchema refuses tables at another version than this code's, or
// missing one of the tables of their version (a migration cut short, or a
// table dropped by hand).
func (s *store) checkSchema(ctx context.Context) error {
	v, err := s.version(ctx)
	if err != nil {
		return err
	}
	latest := SchemaVersion()
	switch {
	case v > latest:
		return fmt.Errorf("%w: prefix %s is at version %d; this kyu knows versions up to %d", ErrSchemaNewer, s.opts.Prefix, v, latest)
	case v < latest:
		return fmt.Errorf("%w: prefix %s is at version %d, this kyu needs %d; run `kyu migrate` or open with AutoMigrate",
			ErrNotMigrated, s.opts.Prefix, v, latest)
	}
	missing, err := s.missingTables(ctx)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: prefix %s records version %d but has no table %s; run `kyu migrate` to create it again",
			ErrNotMigrated, s.opts.Prefix, v, strings.Join(missing, ", "))
	}
	return nil
}

// missingTables lists the tables of the current version that the
// database lacks, by full name.
func (s *store) missingTables(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ?`,
		strings.ReplaceAll(s.opts.Prefix, "_", `\_`)+"%")
	if err != nil {
		return nil, fmt.Errorf("kyu/mysql: check tables of prefix %s: %w", s.opts.Prefix, err)
	}
	defer rows.Close()
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("kyu/mysql: check tables of prefix %s: %w", s.opts.Prefix, err)
		}
		have[name] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("kyu/mysql: check tables of prefix %s: %w", s.opts.Prefix, err)
	}
	var missing []string
	for _, t := range tables {
		if !have[s.opts.Prefix+t] {
			missing = append(missing, s.opts.Prefix+t)
		}
	}
	return missing, nil
}

// table is the quoted name of one of the store's tables.
func (s *store) table(name string) string {
	return "`" + s.opts.Prefix + name + "`"
}
