package kyu

import (
	"context"

	"github.com/kyuhq/kyu/internal/maintenance"
)

// startMaintenance starts the worker's maintainer: it promotes due
// scheduled and retry jobs, recovers expired leases and applies retention
// while the processes sharing the store elect it, and stands by otherwise.
func (w *Worker) startMaintenance(ctx context.Context) {
	m := &maintenance.Maintainer{
		Backend:  w.b,
		Holder:   w.cfg.ID,
		Interval: w.cfg.MaintenanceInterval,
		Now:      w.cfg.Clock.Now,
		Log:      w.log,
	}
	w.maint.Start(ctx, m.Run)
}
