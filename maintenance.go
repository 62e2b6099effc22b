package kyu

import (
	"context"

	"github.com/kyuhq/kyu/internal/maintenance"
)

// startMaintenance starts the three maintenance loops: promoting due
// scheduled and retry jobs, recovering expired leases, applying retention.
func (w *Worker) startMaintenance(ctx context.Context) {
	for i, s := range maintenance.Steps(w.b) {
		w.maint[i].Start(ctx, func(ctx context.Context) {
			maintenance.Loop(ctx, s, w.cfg.MaintenanceInterval, w.cfg.Clock.Now, w.log)
		})
	}
}
