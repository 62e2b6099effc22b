package faktory

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

// infoState is INFO's answer, in the shape Faktory's clients read.
type infoState struct {
	Now           string     `json:"now"`
	ServerUTCTime string     `json:"server_utc_time"`
	Data          infoData   `json:"faktory"`
	Server        infoServer `json:"server"`
}

// infoData counts jobs: pending per queue, and kyu's states as
// Faktory's sets (scheduled, retries, dead = failed, working = active).
type infoData struct {
	Queues         map[string]int64          `json:"queues"`
	Sets           map[string]int64          `json:"sets"`
	Tasks          map[string]map[string]any `json:"tasks"`
	TotalFailures  int64                     `json:"total_failures"`
	TotalProcessed int64                     `json:"total_processed"`
	TotalEnqueued  int64                     `json:"total_enqueued"`
	TotalQueues    int                       `json:"total_queues"`
}

// infoServer describes this server.
type infoServer struct {
	Description  string `json:"description"`
	Version      string `json:"faktory_version"`
	Uptime       int64  `json:"uptime"`
	Connections  int    `json:"connections"`
	CommandCount int64  `json:"command_count"`
	UsedMemoryMB uint64 `json:"used_memory_mb"`
}

// info answers INFO with the store's counts and the listener's own.
func (c *conn) info(ctx context.Context) error {
	now := c.l.cfg.Now()
	st, err := c.l.b.Stats(ctx, backend.StatsParams{Now: now})
	if err != nil {
		return c.out.err("ERR", "INFO: "+errText(err))
	}
	d := infoData{Queues: map[string]int64{}, Sets: map[string]int64{}, Tasks: map[string]map[string]any{},
		TotalFailures: st.Failed, TotalProcessed: st.Processed, TotalQueues: len(st.Queues)}
	for _, q := range st.Queues {
		d.Queues[q.Name] = q.Counts[backend.StatePending]
		d.TotalEnqueued += q.Counts[backend.StatePending]
		d.Sets["scheduled"] += q.Counts[backend.StateScheduled]
		d.Sets["retries"] += q.Counts[backend.StateRetry]
		d.Sets["dead"] += q.Counts[backend.StateFailed]
		d.Sets["working"] += q.Counts[backend.StateActive]
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	c.l.mu.Lock()
	conns := len(c.l.conns)
	c.l.mu.Unlock()
	b, err := json.Marshal(infoState{
		Now:           now.UTC().Format(time.RFC3339Nano),
		ServerUTCTime: now.UTC().Format("15:04:05 UTC"),
		Data:          d,
		Server: infoServer{
			Description: "kyu", Version: kyu.Version(), Uptime: int64(now.Sub(c.l.started).Seconds()),
			Connections: conns, CommandCount: c.l.commands.Load(), UsedMemoryMB: ms.Sys >> 20,
		},
	})
	if err != nil {
		return c.out.err("ERR", "INFO: "+err.Error())
	}
	return c.out.bulk(b)
}

// queue answers QUEUE PAUSE|RESUME|REMOVE|LATENCY names...: kyu's pause and
// resume, and REMOVE deletes the queue's pending jobs (what a Faktory
// queue holds). "*" names every queue the store knows.
func (c *conn) queue(ctx context.Context, sub string, names []string) error {
	now := c.l.cfg.Now()
	if sub == "LATENCY" {
		return c.latency(ctx, names, now)
	}
	if slices.Contains(names, "*") {
		st, err := c.l.b.Stats(ctx, backend.StatsParams{Now: now})
		if err != nil {
			return c.out.err("ERR", "QUEUE: "+errText(err))
		}
		names = names[:0]
		for _, q := range st.Queues {
			names = append(names, q.Name)
		}
	}
	for _, q := range names {
		var err error
		switch sub {
		case "PAUSE", "RESUME":
			paused := sub == "PAUSE"
			_, err = c.l.b.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: q, Paused: &paused, Now: now})
			if err == nil && paused {
				c.l.fetches.paused(q)
			}
		case "REMOVE":
			err = c.purge(ctx, q, backend.StatePending, now)
		}
		if err != nil {
			return c.out.err("ERR", fmt.Sprintf("QUEUE %s %s: %s", sub, q, errText(err)))
		}
	}
	return c.out.ok()
}

// purge deletes every job of queue in state, a batch at a time.
func (c *conn) purge(ctx context.Context, queue string, state backend.State, now time.Time) error {
	for {
		res, err := c.l.b.Purge(ctx, backend.PurgeParams{Queue: queue, State: state, Limit: backend.MaxBatchLimit, Now: now})
		if err != nil {
			return err
		}
		if res.Count < backend.MaxBatchLimit {
			return nil
		}
	}
}

// flush answers FLUSH: with AllowFlush, every job that is not running
// is deleted from every queue (running jobs end as usual); without it,
// FLUSH is refused.
func (c *conn) flush(ctx context.Context) error {
	if !c.l.cfg.AllowFlush {
		return c.out.err("ERR", "FLUSH is off: it would wipe the whole store; start kyu server with --faktory-allow-flush to allow it")
	}
	now := c.l.cfg.Now()
	st, err := c.l.b.Stats(ctx, backend.StatsParams{Now: now})
	if err != nil {
		return c.out.err("ERR", "FLUSH: "+errText(err))
	}
	for _, q := range st.Queues {
		for _, s := range backend.States() {
			if s == backend.StateActive || q.Counts[s] == 0 {
				continue
			}
			if err := c.purge(ctx, q.Name, s, now); err != nil {
				return c.out.err("ERR", fmt.Sprintf("FLUSH %s: %s", q.Name, errText(err)))
			}
		}
	}
	c.l.log.Warn("kyu faktory: FLUSH deleted every job not running", "remote", c.nc.RemoteAddr().String())
	return c.out.ok()
}

// latency answers QUEUE LATENCY names...: a JSON map from each queue to
// the seconds its oldest pending job has been due (0 when none waits).
func (c *conn) latency(ctx context.Context, names []string, now time.Time) error {
	st, err := c.l.b.Stats(ctx, backend.StatsParams{Now: now})
	if err != nil {
		return c.out.err("ERR", "QUEUE LATENCY: "+errText(err))
	}
	res := make(map[string]float64, len(names))
	for _, q := range names {
		res[q] = 0
	}
	for _, q := range st.Queues {
		if _, ok := res[q.Name]; ok && !q.OldestPending.IsZero() {
			res[q.Name] = max(now.Sub(q.OldestPending).Seconds(), 0)
		}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return c.out.err("ERR", "QUEUE LATENCY: "+err.Error())
	}
	return c.out.bulk(b)
}
