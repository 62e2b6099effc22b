package cli

import (
	"bufio"
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

// queueLine is one queue of `kyu queues -o json`: the REST API's queue and
// its latency (how long its oldest pending job has waited).
type queueLine struct {
	api.Queue
	Latency api.Duration `json:"latency"`
}

// newQueuesCommand builds `kyu queues` and its subcommands.
func newQueuesCommand() *cobra.Command {
	var f storeFlags
	cmd := &cobra.Command{
		Use:   "queues",
		Short: "List queues with their counts and latency; pause, resume, purge or retry one",
		Long: `List every queue with its jobs per state, its latency (how long its
oldest pending job has waited to start) and whether it is paused. -o json
writes one queue per line.`,
		Example: `  kyu queues
  kyu queues pause emails
  kyu queues purge emails --state failed --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return withClient(ctx, &f, func(c *kyu.Client, format string) error {
				s, err := c.Stats(ctx, 0)
				if err != nil {
					return err
				}
				return printQueues(cmd.OutOrStdout(), format, s.Queues, time.Now())
			})
		},
	}
	f.add(cmd)
	cmd.AddCommand(
		newQueueSettingCommand("pause", "Stop workers from claiming a queue's jobs (enqueues still go in)", "paused",
			func(ctx context.Context, c *kyu.Client, q string) (kyu.QueueSettings, error) {
				return c.PauseQueue(ctx, q)
			}),
		newQueueSettingCommand("resume", "Let workers claim a paused queue's jobs again", "resumed",
			func(ctx context.Context, c *kyu.Client, q string) (kyu.QueueSettings, error) {
				return c.ResumeQueue(ctx, q)
			}),
		newQueuesPurgeCommand(),
		newQueuesRetryCommand(),
	)
	return cmd
}

// printQueues writes the queues as a table or JSON lines.
func printQueues(w io.Writer, format string, queues []kyu.QueueInfo, now time.Time) error {
	if format == outputJSON {
		for _, q := range queues {
			if err := writeJSONLine(w, queueLine{Queue: api.FromQueueInfo(q), Latency: api.Duration(latency(q, now))}); err != nil {
				return err
			}
		}
		return nil
	}
	cols := []string{"QUEUE", "PAUSED"}
	for _, s := range backend.States() {
		cols = append(cols, strings.ToUpper(string(s)))
	}
	t := newTable(w, append(cols, "LATENCY")...)
	for _, q := range queues {
		row := []string{q.Name, yesNo(q.Settings.Paused)}
		for _, s := range backend.States() {
			row = append(row, strconv.FormatInt(q.Counts[s], 10))
		}
		t.row(append(row, durationCell(latency(q, now)))...)
	}
	return t.flush()
}

// latency is how long the queue's oldest pending job has waited.
func latency(q kyu.QueueInfo, now time.Time) time.Duration {
	if q.OldestPending.IsZero() {
		return 0
	}
	return max(0, now.Sub(q.OldestPending))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// newQueueSettingCommand builds `kyu queues pause|resume NAME`.
func newQueueSettingCommand(name, short, done string, do func(context.Context, *kyu.Client, string) (kyu.QueueSettings, error)) *cobra.Command {
	var f storeFlags
	cmd := &cobra.Command{
		Use:     name + " NAME",
		Short:   short,
		Example: "  kyu queues " + name + " emails",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return withClient(ctx, &f, func(c *kyu.Client, format string) error {
				s, err := do(ctx, c, args[0])
				if err := asUsage(err); err != nil {
					return err
				}
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), struct {
						Name      string                 `json:"name"`
						Paused    bool                   `json:"paused"`
						Retention backend.QueueRetention `json:"retention"`
					}{args[0], s.Paused, s.Retention})
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "queue %s %s\n", args[0], done)
				return err
			})
		},
	}
	f.add(cmd)
	return cmd
}

// asUsage returns a validation error (a bad queue name, state…) as a
// usage error, and other errors as they are.
func asUsage(err error) error {
	var verr *kyu.ValidationError
	if errors.As(err, &verr) {
		return &UsageError{Err: err}
	}
	return err
}

// newQueuesPurgeCommand builds `kyu queues purge`.
func newQueuesPurgeCommand() *cobra.Command {
	var f storeFlags
	var state string
	var yes bool
	cmd := &cobra.Command{
		Use:   "purge NAME --state STATE",
		Short: "Delete every job of a queue in one state",
		Long: `Delete every job of the queue in the given state (not active: cancel
those first). On a terminal it asks for confirmation first, unless --yes.
Prints how many jobs it deleted (-o json: {"count": N}).`,
		Example: `  kyu queues purge emails --state failed --yes`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := parseStateFlag("state", state)
			if err != nil {
				return err
			}
			if s == "" {
				return usageErrorf("queues purge: give --state")
			}
			ask := !yes && isTerminal(cmd.InOrStdin())
			question := fmt.Sprintf("Delete every %s job of queue %s?", s, args[0])
			if err := confirmPurge(ask, cmd.InOrStdin(), cmd.ErrOrStderr(), question); err != nil {
				return err
			}
			ctx := cmd.Context()
			return withClient(ctx, &f, func(c *kyu.Client, format string) error {
				n, err := c.Purge(ctx, args[0], s)
				if err := asUsage(err); err != nil {
					return err
				}
				return printCount(cmd.OutOrStdout(), format, n, fmt.Sprintf("deleted %%d %s jobs of queue %s", s, args[0]))
			})
		},
	}
	fl := cmd.Flags()
	f.add(cmd)
	fl.StringVar(&state, "state", "", "state of the jobs to delete: "+statesList()+" (not active)")
	fl.BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

// newQueuesRetryCommand builds `kyu queues retry`.
func newQueuesRetryCommand() *cobra.Command {
	var f storeFlags
	cmd := &cobra.Command{
		Use:   "retry NAME",
		Short: "Retry every failed job of a queue",
		Long: `Send every failed job of the queue back to pending, as kyu jobs retry
does; a job whose unique key another job now holds is skipped. Prints how
many it retried (-o json: {"count": N}).`,
		Example: `  kyu queues retry emails`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return withClient(ctx, &f, func(c *kyu.Client, format string) error {
				n, err := c.RetryFailed(ctx, args[0])
				if err := asUsage(err); err != nil {
					return err
				}
				return printCount(cmd.OutOrStdout(), format, n, "retried %d failed jobs of queue "+args[0])
			})
		},
	}
	f.add(cmd)
	return cmd
}

// printCount writes a bulk operation's count.
func printCount(w io.Writer, format string, n int, text string) error {
	if format == outputJSON {
		return writeJSON(w, api.Count{Count: n})
	}
	_, err := fmt.Fprintf(w, text+"\n", n)
	return err
}

// confirmPurge asks question when ask is set, and returns an error unless
// the answer is yes.
func confirmPurge(ask bool, in io.Reader, out io.Writer, question string) error {
	if !ask {
		return nil
	}
	ok, err := confirm(in, out, question)
	if err != nil || !ok {
		return errors.Join(err, errors.New("queues purge: not confirmed: nothing deleted"))
	}
	return nil
}

// confirm asks a yes/no question on w and reads the answer from r.
func confirm(r io.Reader, w io.Writer, question string) (bool, error) {
	fmt.Fprintf(w, "%s [y/N] ", question)
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read the answer: %w", err)
	}
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes", nil
}
