package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

// newWorkersCommand builds `kyu workers`.
func newWorkersCommand() *cobra.Command {
	var f storeFlags
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List the worker processes, live and recently dead; quiet or stop one",
		Long: `List the worker processes in the registry: those that refreshed their
entry lately and those gone silent (dead) until their entries expire,
with the jobs each runs and the attempts each ended. STATE is what the
worker says it does (running, quiet, stopping), or dead; a command sent
and not yet taken up shows beside it. -o json writes one worker per
line.`,
		Example: `  kyu workers
  kyu workers -o json | jq -r .id
  kyu workers quiet host-a-4242-1
  kyu workers stop host-a-4242-1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			w := cmd.OutOrStdout()
			return withClient(ctx, &f, func(c *kyu.Client, format string) error {
				ws, err := c.Workers(ctx)
				if err != nil {
					return err
				}
				if format == outputJSON {
					for _, wi := range ws {
						if err := writeJSONLine(w, wi); err != nil {
							return err
						}
					}
					return nil
				}
				t := newTable(w, "ID", "STATE", "HOST", "PID", "QUEUES", "CONCURRENCY", "RUNNING", "PROCESSED", "FAILED", "STARTED", "LAST SEEN")
				for _, wi := range ws {
					state := workerState(wi)
					t.row(wi.ID, state, wi.Host, strconv.Itoa(wi.PID), strings.Join(wi.Queues, ","),
						strconv.Itoa(wi.Concurrency), strconv.Itoa(len(wi.Running)),
						strconv.FormatInt(wi.Processed, 10), strconv.FormatInt(wi.Failed, 10),
						timeCell(wi.StartedAt), timeCell(wi.LastSeen))
				}
				return t.flush()
			})
		},
	}
	f.add(cmd)
	cmd.AddCommand(
		newWorkerCommandCommand("quiet", "Ask a worker to claim nothing more, finish its jobs and stay up",
			func(ctx context.Context, c *kyu.Client, id string) (kyu.WorkerInfo, error) {
				return c.QuietWorker(ctx, id)
			}),
		newWorkerCommandCommand("stop", "Ask a worker to shut down gracefully",
			func(ctx context.Context, c *kyu.Client, id string) (kyu.WorkerInfo, error) {
				return c.StopWorker(ctx, id)
			}),
	)
	return cmd
}

// workerState is a worker's STATE cell: dead, or the state it reports
// (running when it says none), with a command not yet taken up beside it.
func workerState(wi kyu.WorkerInfo) string {
	if wi.Dead {
		return "dead"
	}
	state := string(wi.State)
	if state == "" {
		state = string(backend.WorkerRunning)
	}
	taken := (wi.Command == backend.CommandQuiet && wi.State != backend.WorkerRunning && wi.State != "") ||
		(wi.Command == backend.CommandStop && wi.State == backend.WorkerStopping)
	if wi.Command != "" && !taken {
		state += " (" + string(wi.Command) + " sent)"
	}
	return state
}

// newWorkerCommandCommand builds `kyu workers quiet|stop ID`.
func newWorkerCommandCommand(name, short string, do func(context.Context, *kyu.Client, string) (kyu.WorkerInfo, error)) *cobra.Command {
	var f storeFlags
	cmd := &cobra.Command{
		Use:   name + " ID",
		Short: short,
		Long: short + `. The worker takes the command up at its next registry refresh
(every 10s by default) and is given it again at each refresh until its
entry goes; repeating it changes nothing, and stop wins over quiet. An
id with no entry is an error.`,
		Example: "  kyu workers " + name + " host-a-4242-1",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return withClient(ctx, &f, func(c *kyu.Client, format string) error {
				wi, err := do(ctx, c, args[0])
				if err := asUsage(err); err != nil {
					return err
				}
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), wi)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "worker %s: %s sent\n", args[0], wi.Command)
				return err
			})
		},
	}
	f.add(cmd)
	return cmd
}
