package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// defaultFollowInterval is how often `kyu jobs logs --follow` reads the job.
const defaultFollowInterval = time.Second

// newJobsCommand builds `kyu jobs` and its subcommands.
func newJobsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List, show, wait for, retry, cancel, delete and run jobs",
		Example: `  kyu jobs list --state failed
  kyu jobs get 01a2175e-244e-7a4f-9e3a-6376c41a39c5`,
		Args: cobra.NoArgs, // an unknown subcommand is a usage error
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(
		newJobsListCommand(),
		newJobsGetCommand(),
		newJobsWaitCommand(),
		newJobsLogsCommand(),
		newJobsActionCommand("retry", "Send failed or cancelled jobs back to pending", "retried",
			func(ctx context.Context, c *kyu.Client, id string) (*kyu.Job, error) { return c.Retry(ctx, id) }),
		newJobsActionCommand("cancel", "Cancel jobs (an active one at its worker's next heartbeat)", "cancelled",
			func(ctx context.Context, c *kyu.Client, id string) (*kyu.Job, error) { return c.Cancel(ctx, id) }),
		newJobsActionCommand("run", "Make scheduled or retry jobs pending now", "made pending",
			func(ctx context.Context, c *kyu.Client, id string) (*kyu.Job, error) { return c.RunNow(ctx, id) }),
		newJobsActionCommand("delete", "Delete jobs (not active ones: cancel them first)", "deleted",
			func(ctx context.Context, c *kyu.Client, id string) (*kyu.Job, error) { return nil, c.Delete(ctx, id) }),
	)
	return cmd
}

// jobsListFlags are the flags of `kyu jobs list`.
type jobsListFlags struct {
	store   storeFlags
	state   string
	queue   string
	jobType string
	tag     string
	search  string
	limit   int
	order   string
	cursor  string
}

// newJobsListCommand builds `kyu jobs list`.
func newJobsListCommand() *cobra.Command {
	var f jobsListFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List jobs, oldest first, with filters",
		Long: `List jobs in enqueue order, oldest first (--order newest for the
reverse), filtered by state, queue, type, tag (exact) and a search (an
id prefix, a word of the title or a tag). It shows at most --limit jobs (0 for all);
when more match, stderr says how to continue (--cursor).

-o json writes one job per line (JSON lines), without payload, result
and logs (kyu jobs get has them).`,
		Example: `  kyu jobs list --state failed --queue emails
  kyu jobs list --type report.build --order newest --limit 10 -o json
  kyu jobs list --tag customer-42`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runJobsList(cmd.Context(), &f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	f.store.add(cmd)
	fl.StringVar(&f.state, "state", "", "only jobs in this state: "+statesList())
	fl.StringVar(&f.queue, "queue", "", "only jobs of this queue")
	fl.StringVar(&f.jobType, "type", "", "only jobs of this type")
	fl.StringVar(&f.tag, "tag", "", "only jobs with exactly this tag (case-sensitive)")
	fl.StringVar(&f.search, "search", "", "only jobs whose id starts with it, whose title contains it, or with it as a tag")
	fl.IntVar(&f.limit, "limit", 50, "jobs to show at most (0 for all)")
	fl.StringVar(&f.order, "order", "oldest", "oldest or newest first")
	fl.StringVar(&f.cursor, "cursor", "", "continue a listing where the previous one stopped")
	return cmd
}

// statesList names every state for a flag's help.
func statesList() string {
	names := make([]string, 0, 7)
	for _, s := range backend.States() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// parseStateFlag reads a state flag; "" is every state.
func parseStateFlag(name, v string) (kyu.State, error) {
	if v == "" {
		return "", nil
	}
	s, err := backend.ParseState(v)
	if err != nil {
		return "", usageErrorf("--%s: %q is not a state: give one of %s", name, v, statesList())
	}
	return s, nil
}

// runJobsList pages through the listing and prints it.
func runJobsList(ctx context.Context, f *jobsListFlags, stdout, stderr io.Writer) error {
	state, err := parseStateFlag("state", f.state)
	if err != nil {
		return err
	}
	var order kyu.ListOrder
	switch f.order {
	case "oldest":
		order = kyu.OldestFirst
	case "newest":
		order = kyu.NewestFirst
	default:
		return usageErrorf("--order: %q: give oldest or newest", f.order)
	}
	if f.limit < 0 {
		return usageErrorf("--limit: %d is negative", f.limit)
	}
	return withClient(ctx, &f.store, func(c *kyu.Client, format string) error {
		var t *table
		if format == outputTable {
			t = newTable(stdout, "ID", "STATE", "QUEUE", "TYPE", "PRIO", "ATTEMPT", "RUN AT", "TITLE")
		}
		opts := kyu.ListOptions{Queue: f.queue, State: state, Type: f.jobType, Tag: f.tag, Search: f.search, Order: order, Cursor: f.cursor}
		shown := 0
		for {
			opts.Limit = 1000
			if f.limit > 0 {
				opts.Limit = min(1000, f.limit-shown)
			}
			page, err := c.List(ctx, opts)
			var verr *kyu.ValidationError
			if errors.As(err, &verr) {
				return &UsageError{Err: err}
			}
			if err != nil {
				return err
			}
			for _, j := range page.Jobs {
				if t == nil {
					if err := writeJSONLine(stdout, api.FromJob(jobRecord(j))); err != nil {
						return err
					}
					continue
				}
				t.row(j.ID, string(j.State), j.Queue, j.Type, strconv.Itoa(j.Priority),
					fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts), timeCell(j.RunAt), j.Title)
			}
			shown += len(page.Jobs)
			opts.Cursor = page.NextCursor
			if page.NextCursor == "" || (f.limit > 0 && shown >= f.limit) {
				break
			}
		}
		if t != nil {
			if err := t.flush(); err != nil {
				return err
			}
		}
		if opts.Cursor != "" {
			note(stderr, "kyu: more jobs match: continue with --cursor %s", opts.Cursor)
		}
		return nil
	})
}

// newJobsGetCommand builds `kyu jobs get`.
func newJobsGetCommand() *cobra.Command {
	var f storeFlags
	var byJID bool
	cmd := &cobra.Command{
		Use:   "get ID|JID",
		Short: "Show a job: every field, its errors, progress, logs and result",
		Long: `Show one job with every field, the error of each unsuccessful attempt,
its progress, its log lines, its payload and its result. -o json writes
the job as the REST API does (payload and result as JSON when they are,
else base64 in payload_b64, result_b64). When no job has the id, the job
whose jid it is (kyu enqueue --jid) is shown; --jid looks up the jid
only. Exits 3 when no job has the id or jid.`,
		Example: `  kyu jobs get 01a2175e-244e-7a4f-9e3a-6376c41a39c5
  kyu jobs get 01a2175e-244e-7a4f-9e3a-6376c41a39c5 -o json | jq .result
  kyu jobs get invoice-42`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return withClient(ctx, &f, func(c *kyu.Client, format string) error {
				j, err := getJob(ctx, c, args[0], byJID)
				if err != nil {
					return err
				}
				return printJob(cmd.OutOrStdout(), format, j)
			})
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&byJID, "jid", false, "take the argument as a jid only")
	return cmd
}

// getJob reads the job with id key or, when there is none, the job with
// jid key; with byJID, only the latter. When neither exists, the error is
// the id's.
func getJob(ctx context.Context, c *kyu.Client, key string, byJID bool) (*kyu.Job, error) {
	if byJID {
		return c.GetByJID(ctx, key)
	}
	j, err := c.Get(ctx, key)
	if errors.Is(err, kyu.ErrNotFound) && len(key) <= backend.MaxJID {
		if jj, jerr := c.GetByJID(ctx, key); !errors.Is(jerr, kyu.ErrNotFound) {
			return jj, jerr
		}
	}
	return j, err
}

// printJob writes one job in full.
func printJob(w io.Writer, format string, j *kyu.Job) error {
	if format == outputJSON {
		return writeJSON(w, api.FromJob(jobRecord(j)))
	}
	t := newTable(w, "FIELD", "VALUE")
	field := func(name, v string) {
		if v != "" && v != "-" {
			t.row(name, v)
		}
	}
	field("id", j.ID)
	field("type", j.Type)
	field("queue", j.Queue)
	field("title", j.Title)
	field("state", string(j.State))
	if j.CancelRequested {
		field("cancel requested", "yes")
	}
	field("cancel reason", j.CancelReason)
	field("priority", strconv.Itoa(j.Priority))
	field("attempt", fmt.Sprintf("%d of %d", j.Attempt, j.MaxAttempts))
	field("run at", timeCell(j.RunAt))
	field("timeout", durationCell(j.Timeout))
	field("deadline", timeCell(j.Deadline))
	field("unique key", j.UniqueKey)
	field("unique for", durationCell(j.UniqueFor))
	field("jid", j.JID)
	field("tags", strings.Join(j.Tags, ", "))
	for k, v := range sortedMap(j.Metadata) {
		field("metadata "+k, v)
	}
	field("retention", j.Retention.String())
	field("created", timeCell(j.CreatedAt))
	field("started", timeCell(j.StartedAt))
	field("finished", timeCell(j.FinishedAt))
	field("expires", timeCell(j.ExpiresAt))
	field("worker", j.WorkerID)
	if p := j.Progress; p != nil {
		field("progress", strings.TrimSpace(fmt.Sprintf("%g%% %s", p.Percent, p.Message)))
	}
	field("payload", string(j.Payload))
	field("result", string(j.Result))
	if err := t.flush(); err != nil {
		return err
	}
	if len(j.Errors) > 0 {
		fmt.Fprintln(w, "\nErrors:")
		et := newTable(w, "ATTEMPT", "AT", "KIND", "MESSAGE")
		for _, e := range j.Errors {
			et.row(strconv.Itoa(e.Attempt), timeCell(e.At), e.Kind, e.Message)
		}
		if err := et.flush(); err != nil {
			return err
		}
	}
	if len(j.Logs) > 0 || j.LogsDropped > 0 {
		fmt.Fprintln(w, "\nLogs:")
		for _, l := range j.Logs {
			writeLogLine(w, l)
		}
		if j.LogsDropped > 0 {
			fmt.Fprintf(w, "(%d more lines dropped past the cap)\n", j.LogsDropped)
		}
	}
	return nil
}

// newJobsWaitCommand builds `kyu jobs wait`.
func newJobsWaitCommand() *cobra.Command {
	var f storeFlags
	cmd := &cobra.Command{
		Use:   "wait ID",
		Short: "Wait until a job is finished and show it",
		Long: `Wait until the job is completed, failed or cancelled, then show it as
kyu jobs get does. Exits 0 when it completed, 1 when it failed or was
cancelled, 3 when no job has the id.`,
		Example: `  kyu jobs wait $(kyu enqueue report.build)`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return withClient(ctx, &f, func(c *kyu.Client, format string) error {
				j, err := c.Wait(ctx, args[0])
				if err != nil {
					return err
				}
				if err := printJob(cmd.OutOrStdout(), format, j); err != nil {
					return err
				}
				if j.State != kyu.StateCompleted {
					return fmt.Errorf("job %s ended %s", j.ID, j.State)
				}
				return nil
			})
		},
	}
	f.add(cmd)
	return cmd
}

// newJobsLogsCommand builds `kyu jobs logs`.
func newJobsLogsCommand() *cobra.Command {
	var f storeFlags
	var follow bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print the lines a job's handler logged",
		Long: `Print the lines the job's handler logged, with their times. --follow
keeps printing new lines until the job is finished, or until Ctrl-C
(which exits 0). -o json writes one line object per line.`,
		Example: `  kyu jobs logs 01a2175e-244e-7a4f-9e3a-6376c41a39c5 --follow`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if interval <= 0 {
				return usageErrorf("--interval: %v is not positive", interval)
			}
			ctx := cmd.Context()
			return withClient(ctx, &f, func(c *kyu.Client, format string) error {
				return followLogs(ctx, c, args[0], follow, interval, format, cmd.OutOrStdout())
			})
		},
	}
	fl := cmd.Flags()
	f.add(cmd)
	fl.BoolVarP(&follow, "follow", "f", false, "keep printing new lines until the job is finished")
	fl.DurationVar(&interval, "interval", defaultFollowInterval, "with --follow, how often to read the job")
	return cmd
}

// followLogs prints the job's log lines, and with follow the new ones
// until the job is finished or ctx ends (not an error).
func followLogs(ctx context.Context, c *kyu.Client, id string, follow bool, interval time.Duration, format string, w io.Writer) error {
	printed := 0
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		j, err := c.Get(ctx, id)
		if err != nil {
			if follow && ctx.Err() != nil {
				return nil
			}
			return err
		}
		// Lines only ever append (the first ones are kept past the cap).
		for _, l := range j.Logs[min(printed, len(j.Logs)):] {
			if format == outputJSON {
				if err := writeJSONLine(w, l); err != nil {
					return err
				}
			} else {
				writeLogLine(w, l)
			}
		}
		printed = max(printed, len(j.Logs))
		if !follow || j.State.Final() {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// writeLogLine writes one log line with its time.
func writeLogLine(w io.Writer, l kyu.LogLine) {
	fmt.Fprintf(w, "%s  %s\n", l.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"), l.Line)
}

// newJobsActionCommand builds `kyu jobs retry|cancel|run|delete ID…`: do
// is called for each id, in order; a failure on one does not stop the
// others.
func newJobsActionCommand(name, short, done string, do func(context.Context, *kyu.Client, string) (*kyu.Job, error)) *cobra.Command {
	var f storeFlags
	cmd := &cobra.Command{
		Use:   name + " ID...",
		Short: short,
		Long: short + `.

Each id is tried in turn; one that fails is reported on stderr and the
others still go. Prints each job's state afterwards (-o json: one job per
line). Exits 1 when one failed, 3 when every failure was an unknown id.`,
		Example: "  kyu jobs " + name + " 01a2175e-244e-7a4f-9e3a-6376c41a39c5 01a2175e-2451-7b0c-8d1e-2f3a4b5c6d7e",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			return withClient(ctx, &f, func(c *kyu.Client, format string) error {
				var failed []error
				for _, id := range args {
					j, err := do(ctx, c, id)
					if err != nil {
						if ctx.Err() != nil {
							return err
						}
						note(stderr, "%v", err)
						failed = append(failed, err)
						continue
					}
					if err := printActionResult(stdout, format, id, done, j); err != nil {
						return err
					}
				}
				return actionError(name, len(args), failed)
			})
		},
	}
	f.add(cmd)
	return cmd
}

// printActionResult writes what an action did to one job (j is nil after
// delete).
func printActionResult(w io.Writer, format, id, done string, j *kyu.Job) error {
	switch {
	case format == outputJSON && j == nil:
		return writeJSONLine(w, struct {
			ID      string `json:"id"`
			Deleted bool   `json:"deleted"`
		}{id, true})
	case format == outputJSON:
		return writeJSONLine(w, api.FromJob(jobRecord(j)))
	case j == nil:
		_, err := fmt.Fprintf(w, "%s %s\n", id, done)
		return err
	}
	_, err := fmt.Fprintf(w, "%s %s: now %s\n", id, done, j.State)
	return err
}

// actionError sums up the failures of an action on n ids: nil for none,
// one matching kyu.ErrNotFound when every failure was an unknown id.
func actionError(name string, n int, failed []error) error {
	if len(failed) == 0 {
		return nil
	}
	for _, err := range failed {
		if !errors.Is(err, kyu.ErrNotFound) {
			return fmt.Errorf("jobs %s: %d of %d jobs failed", name, len(failed), n)
		}
	}
	return fmt.Errorf("jobs %s: %d of %d jobs not found: %w", name, len(failed), n, kyu.ErrNotFound)
}

// jobRecord turns a job back into the stored form, to show it as the REST
// API does.
func jobRecord(j *kyu.Job) *backend.Job {
	return &backend.Job{
		ID: j.ID, Type: j.Type, Queue: j.Queue, Payload: j.Payload, Title: j.Title,
		Priority: j.Priority, State: j.State, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts,
		RunAt: j.RunAt, Timeout: j.Timeout, Deadline: j.Deadline,
		UniqueKey: j.UniqueKey, UniqueFor: j.UniqueFor, JID: j.JID, Tags: j.Tags, Metadata: j.Metadata,
		Retention: j.Retention, CreatedAt: j.CreatedAt, StartedAt: j.StartedAt,
		FinishedAt: j.FinishedAt, WorkerID: j.WorkerID, Errors: j.Errors,
		Result: j.Result, CancelReason: j.CancelReason, CancelRequested: j.CancelRequested,
		Progress: j.Progress, Logs: j.Logs, LogsDropped: j.LogsDropped, ExpiresAt: j.ExpiresAt,
	}
}
