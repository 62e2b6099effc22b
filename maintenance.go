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
	steps := [3]struct {
		name string
		fn   func(context.Context, backend.MaintenanceParams) (backend.MaintenanceResult, error)
	}{
		{"promote", w.b.Promote},
		{"recover leases", w.b.RecoverLeases},
		{"apply retention", w.b.ApplyRetention},
	}
	for i, s := range steps {
		w.maint[i].Start(ctx, func(ctx context.Context) { w.maintenanceLoop(ctx, s.name, s.fn) })
	}
}

// maintenanceLoop runs step every MaintenanceInterval, repeating it while
// it reports a full limit of work.
func (w *Worker) maintenanceLoop(ctx context.Context, name string, step func(context.Context, backend.MaintenanceParams) (backend.MaintenanceResult, error)) {
	t := time.NewTicker(w.cfg.MaintenanceInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for ctx.Err() == nil {
			res, err := step(ctx, backend.MaintenanceParams{Now: w.cfg.Clock.Now(), Limit: maintenanceLimit})
			if err != nil {
				if ctx.Err() == nil {
					w.log.Warn("kyu: maintenance failed", "step", name, "error", err)
				}
				break
			}
			if n := res.Moved + res.Failed + res.Cancelled; n > 0 {
				w.log.Debug("kyu: maintenance", "step", name, "moved", res.Moved, "failed", res.Failed, "cancelled", res.Cancelled)
			}
			if res.Moved+res.Failed+res.Cancelled < maintenanceLimit {
				break
			}
		}
	}
}
