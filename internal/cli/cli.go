// Package cli is the kyu command line as a library: Run parses the
// arguments and runs one subcommand, writing to the given streams, so that
// every subcommand is tested in-process. cmd/kyu only wires it to the
// process (arguments, signals, exit code).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/kyuhq/kyu"
)

// Exit codes that ExitCode returns.
const (
	ExitOK          = 0
	ExitFailure     = 1
	ExitUsage       = 2
	ExitNotFound    = 3   // a job the command names does not exist
	ExitInterrupted = 130 // 128 + SIGINT, as shells report it
)

// Run runs the kyu command line with args (without the program name). It
// returns a *UsageError for bad arguments and ctx's error when interrupted.
// Errors are not printed; that is the caller's choice.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runWithInput(ctx, args, os.Stdin, stdout, stderr)
}

// runWithInput is Run reading standard input (a payload of `kyu enqueue
// TYPE -`, a confirmation) from stdin.
func runWithInput(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var started bool
	root := newRootCommand(stdout, stderr)
	root.SetIn(stdin)
	root.SetFlagErrorFunc(flagError)
	// Cobra parses flags and checks arguments before any PreRun hook, so
	// an error returned before the hook ran is the user's input.
	root.PersistentPreRun = func(*cobra.Command, []string) { started = true }
	root.SetArgs(args)
	if args == nil {
		// Cobra reads os.Args when given nil.
		root.SetArgs([]string{})
	}
	err := root.ExecuteContext(ctx)
	if err != nil && !started {
		return &UsageError{Err: err}
	}
	return err
}

// UsageError is a command line the program could not accept: an unknown
// command or flag, or a bad flag value.
type UsageError struct {
	Err error
}

func (e *UsageError) Error() string {
	return e.Err.Error() + " (see kyu --help)"
}

func (e *UsageError) Unwrap() error { return e.Err }

// usageErrorf builds a UsageError from a message.
func usageErrorf(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// ExitCode maps an error returned by Run to a process exit code: 0 for
// nil, 2 for a usage error, 130 for an interruption, 3 for a job that
// does not exist (kyu.ErrNotFound) and 1 otherwise.
func ExitCode(err error) int {
	var usage *UsageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &usage):
		return ExitUsage
	case errors.Is(err, context.Canceled):
		return ExitInterrupted
	case errors.Is(err, kyu.ErrNotFound):
		return ExitNotFound
	default:
		return ExitFailure
	}
}

// newRootCommand builds the kyu command and its subcommands.
func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "kyu",
		Short: "kyu is a background-job system: a durable priority job queue with workers",
		Long: `kyu is a background-job system: a durable priority job queue with
workers, leases and retries, on an embedded store, Redis, PostgreSQL, MySQL
(or MariaDB) or a kyu server over HTTP.

A store is named by URL (--backend): pebble:///abs/dir or pebble://rel/dir
for the embedded store (a bare path works too; the default is ./kyu-data),
redis://, postgres://, mysql://, http(s):// for a kyu server, or memory:// for a
store in memory, for tests and demos (nothing persists).

The operator commands (enqueue, jobs, queues, stats, workers) take the
store from --backend, else $KYU_BACKEND, else http://127.0.0.1:7420 (the
default kyu server), so with the server running they need no flag. They
print aligned tables, or JSON with -o json (one document, or one line per
item for lists). Exit codes: 0 ok, 1 the operation failed, 2 a usage
error, 3 a job not found.`,
		Version:       versionString(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(
		newVersionCommand(),
		newBenchCommand(),
		newMigrateCommand(),
		newServerCommand(),
		newEnqueueCommand(),
		newJobsCommand(),
		newQueuesCommand(),
		newStatsCommand(),
		newWorkersCommand(),
		newWorkerCommand(),
		newExportCommand(),
		newImportCommand(),
		newCopyCommand(),
	)
	return root
}
