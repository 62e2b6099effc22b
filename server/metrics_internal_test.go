package server

import (
	"fmt"
	"sync"
	"testing"

	"github.com/kyuhq/kyu/backend/pebble"
)

// TestMetricLabelsBoundUnderConcurrency: many goroutines counting jobs of
// distinct queues and types at once never push a job family past
// MaxMetricLabels series, and lose no job.
func TestMetricLabelsBoundUnderConcurrency(t *testing.T) {
	t.Parallel()
	store, err := pebble.Open(t.TempDir(), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	const bound, workers, perWorker = 25, 8, 300
	s, err := New(Config{Backend: store, MaxMetricLabels: bound})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				s.metrics.job(fmt.Sprintf("q%d", i%7), fmt.Sprintf("t%d-%d", w, i)).enqueued.Inc()
			}
		})
	}
	wg.Wait()
	families, err := s.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range families {
		switch f.GetName() {
		case "kyu_jobs_enqueued_total", "kyu_jobs_completed_total", "kyu_jobs_failed_total", "kyu_job_duration_seconds":
		default:
			continue
		}
		checked++
		if n := len(f.GetMetric()); n > bound {
			t.Errorf("%s has %d series; want at most %d", f.GetName(), n, bound)
		}
		if f.GetName() != "kyu_jobs_enqueued_total" {
			continue
		}
		total := 0.0
		for _, m := range f.GetMetric() {
			total += m.GetCounter().GetValue()
		}
		if total != workers*perWorker {
			t.Errorf("kyu_jobs_enqueued_total sums to %v; want %d", total, workers*perWorker)
		}
	}
	if checked != 4 {
		t.Errorf("found %d job families; want 4", checked)
	}
}
