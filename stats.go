package kyu

import (
	"context"
	"fmt"

	"github.com/kyuhq/kyu/backend"
)

// Stats is a picture of the store at one moment: every queue with its
// counts per state, settings and oldest pending job, the attempts ended
// per minute, and the totals. See backend.Stats.
type Stats = backend.Stats

// QueueInfo describes one queue in Stats.
type QueueInfo = backend.QueueInfo

// MinuteCount counts the attempts that ended in one minute.
type MinuteCount = backend.MinuteCount

// Stats returns the store's statistics now, with the per-minute counters
// of the last minutes minutes (0 for none, at most 1440).
func (c *Client) Stats(ctx context.Context, minutes int) (Stats, error) {
	s, err := c.b.Stats(ctx, backend.StatsParams{Now: c.cfg.Clock.Now(), Minutes: minutes})
	if err != nil {
		return Stats{}, fmt.Errorf("kyu: stats: %w", err)
	}
	return s, nil
}

// Workers lists the worker processes in the registry, by id: those that
// have refreshed their entry lately, and those gone silent (Dead) until
// their entries expire.
func (c *Client) Workers(ctx context.Context) ([]WorkerInfo, error) {
	ws, err := c.b.Workers(ctx, backend.WorkersParams{Now: c.cfg.Clock.Now()})
	if err != nil {
		return nil, fmt.Errorf("kyu: list workers: %w", err)
	}
	return ws, nil
}
