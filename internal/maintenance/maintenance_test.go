package maintenance

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
		{"recover: failed within moved", MovedWork, backend.MaintenanceResult{Moved: 600, Failed: 500}, 600},
		{"recover: full", MovedWork, backend.MaintenanceResult{Moved: Limit, Failed: 3}, Limit},
		{"promote: moved and cancelled", PromoteWork, backend.MaintenanceResult{Moved: 600, Cancelled: 400}, 1000},
		{"retention", MovedWork, backend.MaintenanceResult{Moved: 7}, 7},
	} {
		if got := tc.work(tc.res); got != tc.want {
			t.Errorf("%s: work(%+v) = %d, want %d", tc.name, tc.res, got, tc.want)
		}
	}
	if MovedWork(backend.MaintenanceResult{Moved: 600, Failed: 500}) >= Limit {
		t.Error("a RecoverLeases step that recovered 600 jobs (500 of them to failed) would repeat")
	}
}
