package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/backendurl"
	"github.com/kyuhq/kyu/internal/move"
)

// maxWriters bounds kyu copy's --writers.
const maxWriters = 16

// moveFlags are the flags kyu export, import and copy share.
type moveFlags struct {
	queue  string
	states []string
	active string
	batch  int
	// writers is kyu copy's --writers (0 for the other commands).
	writers int
	verify  bool
}

func (f *moveFlags) add(cmd *cobra.Command, filters bool) {
	fl := cmd.Flags()
	if filters {
		fl.StringVar(&f.queue, "queue", "", "move only this queue's jobs and settings")
		fl.StringSliceVar(&f.states, "state", nil, "move only jobs in these states (repeat, or separate with commas)")
	}
	fl.StringVar(&f.active, "active", string(move.ActiveRefuse), "active jobs: refuse (the default: drain or pause first) or pending (move them as pending, their attempt kept)")
	fl.IntVar(&f.batch, "batch", backend.MaxImportBatch, "jobs per batch (at most 1000): what is held in memory and written at once")
}

// options turns the flags into move.Options, with a progress line on
// stderr when it is a terminal.
func (f *moveFlags) options(stderr io.Writer, verb string) (move.Options, *progressLine, error) {
	o := move.Options{Filter: move.Filter{Queue: f.queue}, Active: move.ActivePolicy(f.active), BatchJobs: f.batch, Writers: f.writers}
	for _, s := range f.states {
		st, err := backend.ParseState(strings.TrimSpace(s))
		if err != nil {
			return o, nil, usageErrorf("--state: %v", err)
		}
		o.States = append(o.States, st)
	}
	if o.Active != move.ActiveRefuse && o.Active != move.ActivePending {
		return o, nil, usageErrorf("--active: %q is neither refuse nor pending", f.active)
	}
	if f.batch < 1 || f.batch > backend.MaxImportBatch {
		return o, nil, usageErrorf("--batch: %d is outside [1, %d]", f.batch, backend.MaxImportBatch)
	}
	if f.writers < 0 || f.writers > maxWriters {
		return o, nil, usageErrorf("--writers: %d is outside [1, %d]", f.writers, maxWriters)
	}
	var p *progressLine
	if isTerminal(stderr) {
		p = &progressLine{w: stderr, verb: verb, began: time.Now()}
		o.Progress = p.update
	}
	return o, p, nil
}

// openStore opens a store by URL for a move.
func openStore(ctx context.Context, rawURL, role string) (backend.Backend, error) {
	if rawURL == "" {
		return nil, usageErrorf("%s: the store's URL is required", role)
	}
	b, err := backendurl.Open(ctx, rawURL, backendurl.Options{Token: os.Getenv(tokenEnv)})
	if err != nil {
		return nil, fmt.Errorf("open %s %s: %w", role, redactURL(rawURL), err)
	}
	return b, nil
}

// progressLine rewrites one line on a terminal: jobs done of the total,
// jobs per second and the time left.
type progressLine struct {
	w     io.Writer
	verb  string
	began time.Time
	last  time.Time
}

func (p *progressLine) update(done, total int64) {
	now := time.Now()
	if now.Sub(p.last) < 200*time.Millisecond {
		return
	}
	p.last = now
	secs := now.Sub(p.began).Seconds()
	rate := float64(done) / max(secs, 1e-9)
	line := fmt.Sprintf("\r%s %d", p.verb, done)
	if total > 0 {
		line += fmt.Sprintf("/%d jobs (%.0f%%)", total, 100*float64(done)/float64(total))
	} else {
		line += " jobs"
	}
	line += fmt.Sprintf("  %.0f jobs/s", rate)
	if total > done && rate > 0 {
		line += "  ETA " + (time.Duration(float64(total-done)/rate) * time.Second).Round(time.Second).String()
	}
	fmt.Fprint(p.w, line+"\x1b[K")
}

func (p *progressLine) finish() {
	if p != nil {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

// summary writes what a move did.
func summary(w io.Writer, verb string, s move.Summary) {
	rate := float64(s.Jobs) / max(s.Elapsed.Seconds(), 1e-9)
	fmt.Fprintf(w, "%s %d jobs and %d queue settings in %s (%.0f jobs/s)", verb, s.Jobs, s.Queues, s.Elapsed.Round(time.Millisecond), rate)
	if verb != "exported" {
		fmt.Fprintf(w, ": %d created, %d already there, %d conflicts", s.Created, s.Same, s.Conflicted)
	}
	fmt.Fprintln(w)
	for _, c := range s.Conflicts {
		if c.Line > 0 {
			fmt.Fprintf(w, "  conflict: line %d: %s\n", c.Line, c.Reason)
		} else {
			fmt.Fprintf(w, "  conflict: %s\n", c.Reason)
		}
	}
}

const moveNote = `Each job keeps its id, state, payload, attempts and every attempt's
error, result, logs, progress, run-at, deadline, unique key, retention and
timestamps; queue settings (paused, retention) move too. Per-minute
statistics and the worker registry do not. A job already in the target
with the same content is counted and left alone, so a move interrupted
anywhere is finished by running it again; a different job under the same
id, or a unique key the target's jobs hold, is reported per job and never
merged.

Active jobs are refused by default, naming how many: a worker of the
source runs them now, and the target would run them a second time while
the source's outcome got lost. Drain or pause the source's queues first.
--active=pending moves them as pending with their attempt kept, as lease
recovery would: for a source whose workers are gone for good.

(kyu migrate is something else: it brings a database's schema to this
kyu's version.)`

// newExportCommand builds `kyu export`.
func newExportCommand() *cobra.Command {
	var f moveFlags
	var backendURL, out string
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write a store's jobs and queue settings as JSON lines",
		Long: `Write the jobs of a store (or of one queue, or in some states) and the
queue settings as JSON lines, to stdout or --out: a header line with the
format version, one line per queue, one line per job (the job as
GET /api/v1/jobs/{id} answers it), and an end line with the counts. kyu
import reads it back into any store. Memory stays bounded: jobs are read
and written a batch at a time.

` + moveNote,
		Example: `  kyu export --backend pebble:///var/lib/kyu --out jobs.jsonl
  kyu export --backend redis://localhost:6379/0 --queue emails --state failed,scheduled`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			o, p, err := f.options(cmd.ErrOrStderr(), "exported")
			if err != nil {
				return err
			}
			src, err := openStore(cmd.Context(), resolveBackend(backendURL, os.Getenv), "source")
			if err != nil {
				return err
			}
			defer src.Close()
			w := cmd.OutOrStdout()
			var file *os.File
			if out != "" && out != "-" {
				if file, err = os.Create(out); err != nil {
					return err
				}
				defer func() {
					if cerr := file.Close(); cerr != nil && err == nil {
						err = cerr
					}
				}()
				w = file
			}
			sum, err := move.Export(cmd.Context(), src, w, o)
			p.finish()
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			if file != nil {
				if fi, err := file.Stat(); err == nil && fi.Mode().IsRegular() {
					if err := file.Sync(); err != nil {
						return err
					}
				}
			}
			summary(cmd.ErrOrStderr(), "exported", sum)
			return nil
		},
	}
	f.add(cmd, true)
	cmd.Flags().StringVar(&backendURL, "backend", "", "the store to export, as a URL (default $"+backendEnv+", else "+defaultOperatorURL+")")
	cmd.Flags().StringVar(&out, "out", "", "write to this file instead of stdout")
	return cmd
}

// newImportCommand builds `kyu import`.
func newImportCommand() *cobra.Command {
	var f moveFlags
	var backendURL string
	cmd := &cobra.Command{
		Use:   "import [FILE | -]",
		Short: "Write the jobs of an export into a store",
		Long: `Read an export (kyu export) from FILE, or stdin when FILE is - or missing,
and write its queue settings and jobs into the store. Every line is checked
before anything is written: a truncated file, a line that is not a job or
a format version from the future is refused with its line number and
changes nothing. (Standard input is kept in a temporary file for the two
passes.) Exit code 1 when a job conflicts with the target; the others are
written.

` + moveNote,
		Example: `  kyu import --backend 'postgres://kyu@db/app' jobs.jsonl
  kyu export --backend old-data | kyu import --backend redis://localhost:6379/0 -`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			o, p, err := f.options(cmd.ErrOrStderr(), "imported")
			if err != nil {
				return err
			}
			in, cleanup, err := seekableInput(cmd.InOrStdin(), args)
			if err != nil {
				return err
			}
			defer cleanup()
			dst, err := openStore(cmd.Context(), resolveBackend(backendURL, os.Getenv), "target")
			if err != nil {
				return err
			}
			defer dst.Close()
			sum, err := move.Import(cmd.Context(), dst, in, o)
			p.finish()
			summary(cmd.ErrOrStderr(), "imported", sum)
			if err != nil {
				return fmt.Errorf("import: %w", err)
			}
			if f.verify {
				if _, err := in.Seek(0, io.SeekStart); err != nil {
					return err
				}
				v, err := move.VerifyImport(cmd.Context(), in, dst, o)
				if err != nil {
					return fmt.Errorf("verify: %w", err)
				}
				v.Report(cmd.OutOrStdout())
				if !v.OK() {
					return errors.New("verify: the target differs from the export")
				}
			}
			return nil
		},
	}
	f.add(cmd, false)
	cmd.Flags().IntVar(&f.writers, "writers", 2, "batches written into the target at once (each job is written alone, so batches are independent)")
	cmd.Flags().BoolVar(&f.verify, "verify", false, "afterwards, compare the target with the export: counts per queue and state, and a checksum of every job")
	cmd.Flags().StringVar(&backendURL, "backend", "", "the store to import into, as a URL (default $"+backendEnv+", else "+defaultOperatorURL+")")
	return cmd
}

// seekableInput opens the import's input so it can be read twice: the
// file named, or stdin copied to a temporary file.
func seekableInput(stdin io.Reader, args []string) (io.ReadSeeker, func(), error) {
	if len(args) == 1 && args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			return nil, nil, err
		}
		return f, func() { f.Close() }, nil
	}
	if f, ok := stdin.(*os.File); ok {
		if _, err := f.Seek(0, io.SeekCurrent); err == nil {
			return f, func() {}, nil
		}
	}
	tmp, err := os.CreateTemp("", "kyu-import-*.jsonl")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { tmp.Close(); os.Remove(tmp.Name()) }
	if _, err := io.Copy(tmp, stdin); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("read stdin: %w", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		cleanup()
		return nil, nil, err
	}
	return tmp, cleanup, nil
}

// newCopyCommand builds `kyu copy`.
func newCopyCommand() *cobra.Command {
	var f moveFlags
	var from, to string
	cmd := &cobra.Command{
		Use:   "copy",
		Short: "Copy jobs and queue settings from one store into another",
		Long: `Stream the jobs (of one queue, or in some states) and the queue settings
of one store into another, a batch at a time, as kyu export | kyu import
would without the file. --verify compares both stores afterwards: counts
per queue and state, and a checksum of every job's content (times at the
millisecond, what every store keeps). The source is not changed.

` + moveNote,
		Example: `  kyu copy --from pebble:///var/lib/kyu --to 'postgres://kyu@db/app' --verify
  kyu copy --from redis://old:6379/0 --to redis://new:6379/0 --state failed,scheduled`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, p, err := f.options(cmd.ErrOrStderr(), "copied")
			if err != nil {
				return err
			}
			if from == "" || to == "" {
				return usageErrorf("copy: --from and --to are required")
			}
			src, err := openStore(cmd.Context(), from, "source")
			if err != nil {
				return err
			}
			defer src.Close()
			dst, err := openStore(cmd.Context(), to, "target")
			if err != nil {
				return err
			}
			defer dst.Close()
			sum, err := move.Copy(cmd.Context(), src, dst, o)
			p.finish()
			summary(cmd.ErrOrStderr(), "copied", sum)
			if err != nil {
				return fmt.Errorf("copy: %w", err)
			}
			if f.verify {
				v, err := move.VerifyCopy(cmd.Context(), src, dst, o)
				if err != nil {
					return fmt.Errorf("verify: %w", err)
				}
				v.Report(cmd.OutOrStdout())
				if !v.OK() {
					return errors.New("verify: the target differs from the source")
				}
			}
			return nil
		},
	}
	f.add(cmd, true)
	cmd.Flags().IntVar(&f.writers, "writers", 2, "batches written into the target at once (each job is written alone, so batches are independent)")
	cmd.Flags().BoolVar(&f.verify, "verify", false, "afterwards, compare both stores: counts per queue and state, and a checksum of every job")
	cmd.Flags().StringVar(&from, "from", "", "the source store, as a URL (required)")
	cmd.Flags().StringVar(&to, "to", "", "the target store, as a URL (required)")
	return cmd
}
