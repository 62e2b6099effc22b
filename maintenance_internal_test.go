package kyu

import (
	"testing"

	"github.com/kyuhq/kyu/backend"
)

// A maintenance step repeats only when it touched Limit jobs. For
// RecoverLeases, Failed counts a subset of Moved and must not be added;
// for Promote, Cancelled jobs are distinct from Moved ones.
func TestMaintenanceWork(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		work func(backend.MaintenanceResult) int
		res  backend.MaintenanceResult
		want int
	}{
		{"recover: failed within moved", movedWork, backend.MaintenanceResult{Moved: 600, Failed: 500}, 600},
		{"recover: full", movedWork, backend.MaintenanceResult{Moved: maintenanceLimit, Failed: 3}, maintenanceLimit},
		{"promote: moved and cancelled", promoteWork, backend.MaintenanceResult{Moved: 600, Cancelled: 400}, 1000},
		{"retention", movedWork, backend.MaintenanceResult{Moved: 7}, 7},
	} {
		if got := tc.work(tc.res); got != tc.want {
			t.Errorf("%s: work(%+v) = %d, want %d", tc.name, tc.res, got, tc.want)
		}
	}
	if movedWork(backend.MaintenanceResult{Moved: 600, Failed: 500}) >= maintenanceLimit {
		t.Error("a RecoverLeases step that recovered 600 jobs (500 of them to failed) would repeat")
	}
}
