package postgres

import (
	"context"

	"github.com/kyuhq/kyu/backend"
)

// limit is a step's bound: p.Limit, or the store's own for 0.
func (s *store) limit(p backend.MaintenanceParams) int {
	if p.Limit > 0 {
		return p.Limit
	}
	return s.opts.MaintenanceLimit
}

// Promote moves up to Limit due scheduled and retry jobs to pending, and
// cancels the waiting jobs past their deadline among them, in one
// statement that takes no row another transaction holds.
func (s *store) Promote(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.MaintenanceResult{}, err
	}
	defer s.end()
	var promoted, cancelled, notified int64
	err := s.pool.QueryRow(ctx, s.sqls.step, p.Now, nil, s.limit(p), s.channel).Scan(&promoted, &cancelled, &notified)
	if err != nil {
		return backend.MaintenanceResult{}, s.wrap("promote", err)
	}
	return backend.MaintenanceResult{Moved: int(promoted), Cancelled: int(cancelled)}, nil
}

// RecoverLeases ends up to Limit expired leases in one statement.
func (s *store) RecoverLeases(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.MaintenanceResult{}, err
	}
	defer s.end()
	var moved, failed, notified int64
	err := s.pool.QueryRow(ctx, s.sqls.recover, p.Now, s.limit(p), jsonTime(p.Now), s.channel, backend.MinuteOf(p.Now)).Scan(&moved, &failed, &notified)
	if err != nil {
		return backend.MaintenanceResult{}, s.wrap("recover leases", err)
	}
	return backend.MaintenanceResult{Moved: int(moved), Failed: int(failed)}, nil
}

// ApplyRetention deletes up to Limit final jobs whose retention has run
// out, then forgets up to Limit unique keys whose UniqueFor period ended,
// folds the per-minute counters older than StatsHistory into the totals,
// drops the per-queue ones older than QueueStatsHistory and removes
// expired worker entries.
// Each is one short statement, so neither holds many locks for long.
func (s *store) ApplyRetention(ctx context.Context, p backend.MaintenanceParams) (backend.MaintenanceResult, error) {
	if err := s.begin(ctx); err != nil {
		return backend.MaintenanceResult{}, err
	}
	defer s.end()
	var deleted, forgotten int64
	if err := s.pool.QueryRow(ctx, s.sqls.retention, p.Now, s.limit(p)).Scan(&deleted); err != nil {
		return backend.MaintenanceResult{}, s.wrap("apply retention", err)
	}
	if err := s.pool.QueryRow(ctx, s.sqls.forgetKeys, p.Now, s.limit(p)).Scan(&forgotten); err != nil {
		return backend.MaintenanceResult{}, s.wrap("forget unique keys", err)
	}
	if _, err := s.pool.Exec(ctx, s.sqls.foldMinutes, backend.MinuteOf(p.Now.Add(-backend.StatsHistory))); err != nil {
		return backend.MaintenanceResult{}, s.wrap("fold old counters", err)
	}
	if _, err := s.pool.Exec(ctx, s.sqls.dropQueueMinutes, backend.MinuteOf(p.Now.Add(-backend.QueueStatsHistory))); err != nil {
		return backend.MaintenanceResult{}, s.wrap("drop old queue counters", err)
	}
	if _, err := s.pool.Exec(ctx, s.sqls.forgetWorkers, p.Now); err != nil {
		return backend.MaintenanceResult{}, s.wrap("forget expired workers", err)
	}
	return backend.MaintenanceResult{Moved: int(deleted)}, nil
}
