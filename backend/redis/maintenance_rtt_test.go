package redis

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/internal/maintenance"
	"github.com/redis/rueidis"
)

// maintRTTEnv turns on TestMaintenanceRoundTrips; its value, when a
// duration, is how long to measure (default 10s).
const maintRTTEnv = "KYU_TEST_MAINT_RTT"

// TestMaintenanceRoundTrips measures what maintenance costs a Redis server
// shared by 20 worker processes over 50 queues: the commands per second
// that INFO commandstats counts on a private server while each process
// runs the maintenance a Worker runs, and nothing else. It prints the
// figure; it fails only when maintenance stops being elected (more than a
// tenth of what every process running it would cost).
//
//	KYU_TEST_MAINT_RTT=10s go test -run TestMaintenanceRoundTrips -v ./backend/redis/
func TestMaintenanceRoundTrips(t *testing.T) {
	env := os.Getenv(maintRTTEnv)
	if env == "" {
		t.Skip(maintRTTEnv + " is not set")
	}
	window := 10 * time.Second
	if d, err := time.ParseDuration(env); err == nil {
		window = d
	}
	const processes, queues = 20, 50
	ps := startServer(t)
	o := Options{Addrs: []string{ps.addr()}, Prefix: "rtt", RetryFor: 2 * time.Second}
	ctx := t.Context()
	var trips atomic.Int64 // the client's round trips (a pipeline is one)
	stores := make([]*Store, processes)
	for i := range stores {
		s, err := Open(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		s.client = &countingClient{Client: s.client, n: &trips}
		stores[i] = s
	}
	jobs := make([]backend.NewJob, queues)
	for i := range jobs {
		jobs[i] = backend.NewJob{Type: "t", Queue: fmt.Sprint("q", i)}
	}
	if _, err := stores[0].Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i, s := range stores {
		wg.Go(func() { runMaintainer(runCtx, s, fmt.Sprint("process-", i), log) })
	}
	defer func() { stop(); wg.Wait() }()
	time.Sleep(2 * time.Second) // settle: the first rounds and the election
	before, tripsBefore := commandCalls(t, ps), trips.Load()
	time.Sleep(window)
	after, tripsAfter := commandCalls(t, ps), trips.Load()
	var total, requests int64
	var per []string
	for cmd, n := range after {
		d := n - before[cmd]
		if d <= 0 || cmd == "info" || cmd == "ping" { // the test's and the clients' upkeep
			continue
		}
		total += d
		if clientCommands[cmd] {
			requests += d
		}
		per = append(per, fmt.Sprintf("%s %.1f/s", cmd, float64(d)/window.Seconds()))
	}
	slices.Sort(per)
	sec := window.Seconds()
	t.Logf("maintenance of %d processes over %d queues: %.1f round trips/s, %.1f requests/s (scripts run and queue listings), "+
		"%.1f commands/s with the scripts' own calls (INFO commandstats over %s: %s)",
		processes, queues, float64(tripsAfter-tripsBefore)/sec, float64(requests)/sec, float64(total)/sec, window, strings.Join(per, ", "))
	// Every process running every step would send processes x 3 x
	// (queues+1) requests a second.
	if all := float64(processes * 3 * (queues + 1)); float64(requests)/sec > all/10 {
		t.Errorf("maintenance sends %.1f requests/s; want at most a tenth of the %.0f/s of every process running it", float64(requests)/sec, all)
	}
}

// countingClient counts the round trips of a client: each Do, and each
// DoMulti (one pipeline).
type countingClient struct {
	rueidis.Client
	n *atomic.Int64
}

func (c *countingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.Do(ctx, cmd)
}

func (c *countingClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.DoMulti(ctx, cmds...)
}

// clientCommands are the commands that maintenance sends as requests of
// their own; the others in commandstats are called by its scripts.
var clientCommands = map[string]bool{"fcall": true, "evalsha": true, "eval": true, "hgetall": true}

// runMaintainer runs the maintenance a Worker runs, until ctx ends.
func runMaintainer(ctx context.Context, s *Store, holder string, log *slog.Logger) {
	m := &maintenance.Maintainer{Backend: s, Holder: holder, Interval: time.Second, Now: time.Now, Log: log}
	m.Run(ctx)
}

// commandCalls reads the calls per command from INFO commandstats, which
// counts the commands that scripts call too.
func commandCalls(t *testing.T, ps *privateServer) map[string]int64 {
	t.Helper()
	out, err := ps.cli("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int64{}
	for line := range strings.Lines(out) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		calls[strings.TrimPrefix(name, "cmdstat_")] = v
	}
	return calls
}
