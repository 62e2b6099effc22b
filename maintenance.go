package kyu

import (
	"context"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// maintenanceLimit is how many jobs one maintenance step may touch; a step
// that reaches it is repeated at once.
const maintenanceLimit = 1000

// startMaintenance starts the three maintenance loops: promoting due
// scheduled and retry jobs, recovering expired leases, applying retention.
func (w *Worker) startMaintenance(ctx context.Context) {
	steps := [3]maintenanceStep{
		{"promote", w.b.Promote, promoteWork},
		{"recover leases", w.b.RecoverLeases, movedWork},
		{"apply retention", w.b.ApplyRetention, movedWork},
	}
	for i, s := range steps {
		w.maint[i].Start(ctx, func(ctx context.Context) { w.maintenanceLoop(ctx, s) })
	}
}

// maintenanceStep is one maintenance call and how to count its work.
type maintenanceStep struct {
	name string
	fn   func(context.Context, backend.MaintenanceParams) (backend.MaintenanceResult, error)
	// work is how many jobs a step touched, to compare with its Limit.
	work func(backend.MaintenanceResult) int
}

// promoteWork counts the jobs Promote touched: those it promoted and those
// it cancelled by deadline, two separate sets.
func promoteWork(r backend.MaintenanceResult) int { return r.Moved + r.Cancelled }

// movedWork counts the jobs RecoverLeases or ApplyRetention touched: Moved.
// RecoverLeases' Failed counts a subset of Moved, so it is not added.
func movedWork(r backend.MaintenanceResult) int { return r.Moved }

// maintenanceLoop runs step every MaintenanceInterval, repeating it while
// it reports a full limit of work.
func (w *Worker) maintenanceLoop(ctx context.Context, step maintenanceStep) {
	t := time.NewTicker(w.cfg.MaintenanceInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for ctx.Err() == nil {
			res, err := step.fn(ctx, backend.MaintenanceParams{Now: w.cfg.Clock.Now(), Limit: maintenanceLimit})
			if err != nil {
				if ctx.Err() == nil {
					w.log.Warn("kyu: maintenance failed", "step", step.name, "error", err)
				}
				break
			}
			if n := res.Moved + res.Failed + res.Cancelled; n > 0 {
				w.log.Debug("kyu: maintenance", "step", step.name, "moved", res.Moved, "failed", res.Failed, "cancelled", res.Cancelled)
			}
			if step.work(res) < maintenanceLimit {
				break
			}
		}
	}
}
