package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kyuhq/kyu/backend/mysql"
	"github.com/kyuhq/kyu/backend/postgres"
)

// newMigrateCommand builds `kyu migrate`.
func newMigrateCommand() *cobra.Command {
	var backendURL string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or update the tables of a database store",
		Long: `Bring a database store's schema to the version this kyu needs: create the
schema and its tables on first use, apply the newer migrations later. It is
safe to run again, and from several processes at once; it refuses a schema
written by a newer kyu.

Only the database stores have tables to migrate: PostgreSQL (postgres://,
postgresql://, with the schema as the schema parameter, default kyu) and
MySQL or MariaDB (mysql://, with the tables' prefix as the prefix parameter,
default kyu_). The embedded store needs no migration.`,
		Example: `  kyu migrate --backend 'postgres://kyu@db/app?schema=kyu'
  kyu migrate --backend 'mysql://kyu:secret@db:3306/app?prefix=kyu_'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMigrate(cmd.Context(), backendURL, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&backendURL, "backend", "", "the store to migrate, as a URL (required)")
	return cmd
}

// runMigrate migrates the store named by rawURL and says what it did.
func runMigrate(ctx context.Context, rawURL string, stdout, stderr io.Writer) error {
	if rawURL == "" {
		return usageErrorf("migrate: --backend is required")
	}
	scheme, _, _ := strings.Cut(rawURL, "://")
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var from, to int
	var err error
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		from, to, err = postgres.Migrate(ctx, rawURL, postgres.Options{Logger: log, MaxConns: 2})
	case "mysql":
		from, to, err = mysql.Migrate(ctx, rawURL, mysql.Options{Logger: log, MaxConns: 2})
	default:
		return usageErrorf("migrate: %s has no schema to migrate; only postgres:// and mysql:// stores do", redactURL(rawURL))
	}
	if err != nil {
		return fmt.Errorf("migrate %s: %w", redactURL(rawURL), err)
	}
	if from == to {
		_, err = fmt.Fprintf(stdout, "schema is at version %d; nothing to do\n", to)
		return err
	}
	_, err = fmt.Fprintf(stdout, "schema migrated from version %d to %d\n", from, to)
	return err
}

// redactURL shows a URL without its password.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "the given URL"
}
