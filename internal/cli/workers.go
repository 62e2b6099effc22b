package cli

import (
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kyuhq/kyu"
)

// newWorkersCommand builds `kyu workers`.
func newWorkersCommand() *cobra.Command {
	var f storeFlags
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List the worker processes, live and recently dead",
		Long: `List the worker processes in the registry: those that refreshed their
entry lately and those gone silent (dead) until their entries expire,
with the jobs each runs and the attempts each ended. -o json writes one
worker per line.`,
		Example: `  kyu workers
  kyu workers -o json | jq -r .id`,
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
					state := "live"
					if wi.Dead {
						state = "dead"
					}
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
	return cmd
}
