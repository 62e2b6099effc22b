// Command peers measures kyu beside asynq and River through each system's
// public API: batch enqueue, one producer enqueuing one job per call, the
// drain of a filled queue, and idle enqueue-to-start latency. BullMQ's
// side is the Node script in ../../bullmq; bench/peers/run.sh runs both
// and prints the tables.
//
//	peers check                  are Redis and PostgreSQL there?
//	peers run -system NAME       one system's four measurements, one JSON line
//	peers table FILE             the tables of a results file
//
// NAME is kyu-redis, asynq, kyu-postgres, river or kyu-embedded.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: peers check|run|table [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	switch os.Args[1] {
	case "check":
		err = check(ctx, os.Args[2:])
	case "run":
		err = run(ctx, os.Args[2:])
	case "table":
		err = table(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want check, run or table", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

// storeFlags are the stores' addresses, shared by check and run.
type storeFlags struct {
	redis, postgres string
}

func (s *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.redis, "redis", "redis://127.0.0.1:6379/9", "Redis URL (a database of its own: the systems' keys are removed from it)")
	fs.StringVar(&s.postgres, "postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL (schemas peers_kyu and peers_river are dropped and made in it)")
}

// check reports whether Redis and PostgreSQL answer.
func check(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	var sf storeFlags
	sf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var missing []string
	if err := pingRedis(ctx, sf.redis); err != nil {
		missing = append(missing, fmt.Sprintf("Redis at %s does not answer (%v)", sf.redis, err))
	}
	if err := pingPostgres(ctx, sf.postgres); err != nil {
		missing = append(missing, fmt.Sprintf("PostgreSQL at %s does not answer (%v)", sf.postgres, err))
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s", strings.Join(missing, "; "))
	}
	return nil
}

// run measures one system and prints its result as one JSON line.
func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var sf storeFlags
	sf.register(fs)
	name := fs.String("system", "", "kyu-redis, asynq, kyu-postgres, river or kyu-embedded")
	round := fs.Int("round", 1, "the round's number, recorded in the result")
	kyuVersion := fs.String("kyu-version", "dev", "kyu's version or commit, recorded in the result")
	dir := fs.String("dir", os.TempDir(), "where the embedded store's directory is made")
	var p params
	fs.IntVar(&p.jobs, "jobs", 20000, "jobs per throughput figure")
	fs.IntVar(&p.batch, "batch", 1000, "jobs per batch call")
	fs.IntVar(&p.drainConc, "drain-handlers", 50, "handlers for the drain")
	fs.IntVar(&p.idleConc, "idle-handlers", 10, "handlers for the idle latency")
	fs.IntVar(&p.samples, "samples", 1000, "idle latency samples")
	fs.DurationVar(&p.gap, "gap", 5*time.Millisecond, "idle time before each latency sample")
	fs.DurationVar(&p.stall, "stall", time.Minute, "how long a wait may go without progress")
	fs.DurationVar(&p.poll, "poll", time.Millisecond, "how often the store's counts are read while waiting")
	if err := fs.Parse(args); err != nil {
		return err
	}

	r := result{Round: *round, Load: loadAverage(), Jobs: p.jobs, Batch: p.batch, Drain: p.drainConc, Idle: p.idleConc}
	var s system
	var err error
	switch *name {
	case "kyu-redis":
		r.System, r.Version, r.Store = "kyu", *kyuVersion, "redis"
		s, err = newKyuRedis(sf.redis)
	case "kyu-postgres":
		r.System, r.Version, r.Store = "kyu", *kyuVersion, "postgres"
		s, err = newKyuPostgres(sf.postgres)
	case "kyu-embedded":
		r.System, r.Version, r.Store = "kyu", *kyuVersion, "embedded"
		var k *kyuSystem
		k, err = newKyuEmbedded(*dir)
		if err == nil {
			defer os.RemoveAll(k.url[len("pebble://"):])
		}
		s = k
	case "asynq":
		r.System, r.Version, r.Store = "asynq", moduleVersion("github.com/hibiken/asynq"), "redis"
		s, err = newAsynq(sf.redis)
	case "river":
		r.System, r.Version, r.Store = "River", moduleVersion("github.com/riverqueue/river"), "postgres"
		s = newRiver(sf.postgres)
	default:
		return fmt.Errorf("unknown system %q", *name)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", *name, err)
	}
	begin := time.Now()
	err = measure(ctx, s, p, &r)
	if cerr := s.close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", *name, err)
	}
	r.Seconds = time.Since(begin).Seconds()
	return json.NewEncoder(os.Stdout).Encode(r)
}

// loadAverage returns the machine's 1, 5 and 15 minute load averages, or
// "?" where /proc/loadavg cannot be read.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
