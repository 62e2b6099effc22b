package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/kyuhq/kyu"
)

// enqueueFlags are the flags of `kyu enqueue`.
type enqueueFlags struct {
	store       storeFlags
	queue       string
	priority    int
	delay       time.Duration
	runAt       string
	maxAttempts int
	timeout     time.Duration
	deadline    string
	uniqueKey   string
	uniqueFor   time.Duration
	jid         string
	tags        []string
	title       string
	raw         bool
}

// enqueued is the JSON answer of `kyu enqueue -o json`.
type enqueued struct {
	ID        string    `json:"id"`
	State     kyu.State `json:"state"`
	Duplicate bool      `json:"duplicate"`
}

// newEnqueueCommand builds `kyu enqueue`.
func newEnqueueCommand() *cobra.Command {
	var f enqueueFlags
	cmd := &cobra.Command{
		Use:   "enqueue TYPE [PAYLOAD | -]",
		Short: "Enqueue a job and print its id",
		Long: `Enqueue one job of TYPE. PAYLOAD is JSON, given as an argument or read
from stdin with -; --raw sends the bytes as they are instead. Without a
payload the job has none.

It prints the new job's id. When the jid or the unique key is held,
nothing is enqueued: it prints the holder's id, a note on stderr, and
exits 0 (-o json says "duplicate": true). A jid is an id of your own,
unique in the whole store while its job exists; kyu jobs get takes it
in place of the id.

--run-at and --deadline take a time (RFC 3339, 2026-01-02T15:04:05Z) or
a duration from now (10m).`,
		Example: `  kyu enqueue email.send '{"to":"ada@example.com"}'
  kyu enqueue report.build --queue reports --delay 10m --unique-key daily --title "Daily report"
  kyu enqueue invoice.send '{"n":42}' --jid invoice-42
  echo '{"n":1}' | kyu enqueue count - -o json`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runEnqueue(cmd.Context(), &f, args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	f.store.add(cmd)
	fl.StringVar(&f.queue, "queue", "", "queue (default \"default\")")
	fl.IntVar(&f.priority, "priority", 0, "priority in [-100, 100]; higher runs first")
	fl.DurationVar(&f.delay, "delay", 0, "run this long from now")
	fl.StringVar(&f.runAt, "run-at", "", "run at this time, or this long from now (wins over --delay)")
	fl.IntVar(&f.maxAttempts, "max-attempts", 0, "attempts before the job fails (default 25)")
	fl.DurationVar(&f.timeout, "timeout", 0, "bound on one attempt (default 30m)")
	fl.StringVar(&f.deadline, "deadline", "", "cancel the job if it has not started by this time, or this long from now")
	fl.StringVar(&f.uniqueKey, "unique-key", "", "refuse a duplicate with this key in the queue while this job is not final")
	fl.DurationVar(&f.uniqueFor, "unique-for", 0, "hold the unique key exactly this long from enqueue instead")
	fl.StringVar(&f.jid, "jid", "", "an id of your own for the job, unique in the store while the job exists")
	fl.StringArrayVar(&f.tags, "tag", nil, "tag (repeat for more)")
	fl.StringVar(&f.title, "title", "", "title shown in lists")
	fl.BoolVar(&f.raw, "raw", false, "send the payload's bytes as they are, JSON or not")
	return cmd
}

// runEnqueue enqueues one job and prints its id.
func runEnqueue(ctx context.Context, f *enqueueFlags, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	payload, err := readPayload(args[1:], f.raw, stdin)
	if err != nil {
		return err
	}
	now := time.Now()
	opts := kyu.EnqueueOptions{
		Queue: f.queue, Title: f.title, Priority: f.priority, Delay: f.delay,
		MaxAttempts: f.maxAttempts, Timeout: f.timeout, UniqueKey: f.uniqueKey,
		UniqueFor: f.uniqueFor, JID: f.jid, Tags: f.tags,
	}
	if opts.RunAt, err = parseWhen("run-at", f.runAt, now); err != nil {
		return err
	}
	if opts.Deadline, err = parseWhen("deadline", f.deadline, now); err != nil {
		return err
	}
	return withClient(ctx, &f.store, func(c *kyu.Client, format string) error {
		res, err := c.Enqueue(ctx, args[0], payload, opts)
		var verr *kyu.ValidationError
		switch {
		case errors.As(err, &verr):
			return &UsageError{Err: err}
		case err != nil:
			return err
		case res.Duplicate && jidHeldBy(ctx, c, f.jid, res.ID):
			note(stderr, "kyu: jid %q is held by job %s: nothing enqueued", f.jid, res.ID)
		case res.Duplicate:
			note(stderr, "kyu: unique key %q is held by job %s: nothing enqueued", f.uniqueKey, res.ID)
		}
		if format == outputJSON {
			return writeJSON(stdout, enqueued{ID: res.ID, State: res.State, Duplicate: res.Duplicate})
		}
		_, err = fmt.Fprintln(stdout, res.ID)
		return err
	})
}

// jidHeldBy reports whether job id holds jid: which of a duplicate's jid
// and unique key was held (the jid is checked first).
func jidHeldBy(ctx context.Context, c *kyu.Client, jid, id string) bool {
	if jid == "" {
		return false
	}
	j, err := c.GetByJID(ctx, jid)
	return err == nil && j.ID == id
}

// readPayload returns the payload argument, or stdin's bytes for "-",
// refusing what is not JSON unless raw.
func readPayload(args []string, raw bool, stdin io.Reader) ([]byte, error) {
	if len(args) == 0 {
		return nil, nil
	}
	payload := []byte(args[0])
	if args[0] == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("enqueue: read payload from stdin: %w", err)
		}
		payload = b
	}
	if !raw && !json.Valid(payload) {
		return nil, usageErrorf("enqueue: the payload is not JSON (give --raw to send bytes as they are)")
	}
	return payload, nil
}

// parseWhen reads a time flag: RFC 3339, or a duration from now; "" is the
// zero time.
func parseWhen(name, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		return now.Add(d), nil
	}
	return time.Time{}, usageErrorf("--%s: %q is neither a time (2026-01-02T15:04:05Z) nor a duration (10m)", name, v)
}
