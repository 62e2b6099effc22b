package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// Defaults of `kyu stats`.
const (
	defaultStatsMinutes  = 10
	defaultWatchInterval = 2 * time.Second
)

// clearScreen moves a terminal's cursor home and clears the screen.
const clearScreen = "\x1b[H\x1b[2J"

// statsFlags are the flags of `kyu stats`.
type statsFlags struct {
	store    storeFlags
	minutes  int
	watch    bool
	interval time.Duration
}

// newStatsCommand builds `kyu stats`.
func newStatsCommand() *cobra.Command {
	var f statsFlags
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Show throughput per minute, totals and queues",
		Long: `Show the attempts ended (processed, failed) in each of the last
--minutes minutes, the totals since the store was created, and the
queues as kyu queues does. --watch shows it again every --interval: on a
terminal as a live view redrawn in place, elsewhere one picture after
another; Ctrl-C ends it (exit 0). -o json writes the REST API's stats
document (one per line with --watch).`,
		Example: `  kyu stats
  kyu stats --watch --interval 1s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStats(cmd.Context(), &f, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	f.store.add(cmd)
	fl.IntVar(&f.minutes, "minutes", defaultStatsMinutes, "minutes of throughput to show (at most 1440)")
	fl.BoolVarP(&f.watch, "watch", "w", false, "show it again every --interval until Ctrl-C")
	fl.DurationVar(&f.interval, "interval", defaultWatchInterval, "with --watch, time between pictures")
	return cmd
}

// runStats prints the statistics once, or until ctx ends with --watch.
func runStats(ctx context.Context, f *statsFlags, stdout io.Writer) error {
	if f.minutes < 0 || f.minutes > int(backend.StatsHistory/time.Minute) {
		return usageErrorf("--minutes: %d is outside [0, %d]", f.minutes, int(backend.StatsHistory/time.Minute))
	}
	if f.interval <= 0 {
		return usageErrorf("--interval: %v is not positive", f.interval)
	}
	live := f.watch && isTerminal(stdout)
	return withClient(ctx, &f.store, func(c *kyu.Client, format string) error {
		tick := time.NewTicker(f.interval)
		defer tick.Stop()
		for {
			s, err := c.Stats(ctx, f.minutes)
			if err != nil {
				if f.watch && ctx.Err() != nil {
					return nil // Ctrl-C ends a watch
				}
				return err
			}
			if live && format == outputTable {
				fmt.Fprint(stdout, clearScreen)
			}
			if err := printStats(stdout, format, f.watch, s, time.Now()); err != nil {
				return err
			}
			if !f.watch {
				return nil
			}
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
	})
}

// printStats writes one picture of the statistics; oneLine writes the JSON
// on one line (a stream of pictures).
func printStats(w io.Writer, format string, oneLine bool, s kyu.Stats, now time.Time) error {
	if format == outputJSON {
		if oneLine {
			return writeJSONLine(w, api.FromStats(s))
		}
		return writeJSON(w, api.FromStats(s))
	}
	fmt.Fprintf(w, "kyu stats at %s: %d processed, %d failed since the store was created\n\n", now.UTC().Format(time.RFC3339), s.Processed, s.Failed)
	if len(s.Minutes) > 0 {
		t := newTable(w, "MINUTE", "PROCESSED", "FAILED")
		for _, m := range s.Minutes {
			t.row(m.Minute.UTC().Format("15:04"), strconv.FormatInt(m.Processed, 10), strconv.FormatInt(m.Failed, 10))
		}
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	return printQueues(w, outputTable, s.Queues, now)
}
