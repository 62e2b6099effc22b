// Package maintenance runs a store's three maintenance steps (promoting
// due scheduled and retry jobs, recovering expired leases, applying
// retention) on a ticker. Workers and kyu server both run them; each step
// is safe to run from several processes at once.
package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// Limit is how many jobs one step may touch; a step that reaches it is
// repeated at once.
const Limit = 1000

// Step is one maintenance call of a store and how to count its work.
type Step struct {
	// Name is the step's name in the REST API and in logs: promote,
	// recover or retention.
	Name string
	Run  func(context.Context, backend.MaintenanceParams) (backend.MaintenanceResult, error)
	// Work is how many jobs a call touched, to compare with its Limit.
	Work func(backend.MaintenanceResult) int
}

// Steps returns b's three steps.
func Steps(b backend.Maintainer) [3]Step {
	return [3]Step{
		{"promote", b.Promote, PromoteWork},
		{"recover", b.RecoverLeases, MovedWork},
		{"retention", b.ApplyRetention, MovedWork},
	}
}

// PromoteWork counts the jobs Promote touched: those it promoted and those
// it cancelled by deadline, two separate sets.
func PromoteWork(r backend.MaintenanceResult) int { return r.Moved + r.Cancelled }

// MovedWork counts the jobs RecoverLeases or ApplyRetention touched: Moved.
// RecoverLeases' Failed counts a subset of Moved, so it is not added.
func MovedWork(r backend.MaintenanceResult) int { return r.Moved }

// Loop runs step every interval until ctx ends, at the time now gives,
// repeating it at once while it reports Limit jobs of work. A failure is
// logged on log and waits for the next tick.
func Loop(ctx context.Context, step Step, interval time.Duration, now func() time.Time, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for ctx.Err() == nil {
			res, err := step.Run(ctx, backend.MaintenanceParams{Now: now(), Limit: Limit})
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("kyu: maintenance failed", "step", step.Name, "error", err)
				}
				break
			}
			if res.Moved+res.Failed+res.Cancelled > 0 {
				log.Debug("kyu: maintenance", "step", step.Name, "moved", res.Moved, "failed", res.Failed, "cancelled", res.Cancelled)
			}
			if step.Work(res) < Limit {
				break
			}
		}
	}
}
