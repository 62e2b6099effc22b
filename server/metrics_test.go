package server_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server"
)

// scrape reads /metrics and returns the samples of one metric (a family
// name, or a histogram's name_count), by their label set as written
// (`{queue="a",type="b"}`, or "" for none).
func scrape(t *testing.T, e *env, name string) map[string]float64 {
	t.Helper()
	r := e.req("GET", "/metrics", nil)
	if r.status != 200 {
		t.Fatalf("GET /metrics: %d", r.status)
	}
	out := map[string]float64{}
	for line := range strings.Lines(string(r.body)) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		i := strings.LastIndexByte(rest, ' ')
		if i < 0 {
			continue
		}
		labels, value := strings.TrimSpace(rest[:i]), rest[i+1:]
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[labels] = v
	}
	return out
}

// TestMetricLabelsBounded enqueues more distinct (queue, type) pairs than
// MaxMetricLabels allows and checks that each job family keeps at most
// that many series, that every job is still counted, and where the
// overflow goes.
func TestMetricLabelsBounded(t *testing.T) {
	t.Parallel()
	const bound = 10
	e := newEnv(t, func(c *server.Config) { c.MaxMetricLabels = bound })
	// Queue "a" comes first and takes two slots (its first pair and its
	// "other" series), then one per type: t0..t7 fit, with one slot left
	// for queue "other", type "other".
	for i := range 30 {
		e.enqueue(map[string]any{"type": fmt.Sprintf("t%d", i), "queue": "a"})
	}
	// Queues seen after the bound count as queue "other".
	for i := range 10 {
		e.enqueue(map[string]any{"type": "x", "queue": fmt.Sprintf("b%d", i)})
	}
	enq := scrape(t, e, "kyu_jobs_enqueued_total")
	if len(enq) != bound {
		t.Errorf("kyu_jobs_enqueued_total has %d series; want %d: %v", len(enq), bound, enq)
	}
	total := 0.0
	for _, v := range enq {
		total += v
	}
	if total != 40 {
		t.Errorf("kyu_jobs_enqueued_total sums to %v; want 40 (every job counted)", total)
	}
	for labels, want := range map[string]float64{
		`{queue="a",type="t0"}`:        1,
		`{queue="a",type="t7"}`:        1,
		`{queue="a",type="other"}`:     22,
		`{queue="other",type="other"}`: 10,
	} {
		if got := enq[labels]; got != want {
			t.Errorf("kyu_jobs_enqueued_total%s = %v; want %v", labels, got, want)
		}
	}
	if _, ok := enq[`{queue="a",type="t8"}`]; ok {
		t.Errorf("type t8 has a series of its own past the bound")
	}

	// The other families share the bound and the mapping: a job of queue
	// b3 completes under queue "other", type "other".
	jobs := e.claim("b3", 1)
	if len(jobs) != 1 {
		t.Fatalf("claimed %d jobs from b3; want 1", len(jobs))
	}
	if r := e.req("POST", "/api/v1/jobs/"+jobs[0].ID+"/complete", map[string]any{"lease_token": jobs[0].LeaseToken}); r.status != 200 {
		t.Fatalf("complete: %d %s", r.status, r.body)
	}
	done := scrape(t, e, "kyu_jobs_completed_total")
	if len(done) > bound {
		t.Errorf("kyu_jobs_completed_total has %d series; want at most %d", len(done), bound)
	}
	if got := done[`{queue="other",type="other"}`]; got != 1 {
		t.Errorf(`kyu_jobs_completed_total{queue="other",type="other"} = %v; want 1`, got)
	}
	if n := len(scrape(t, e, "kyu_job_duration_seconds_count")); n > bound {
		t.Errorf("kyu_job_duration_seconds has %d series; want at most %d", n, bound)
	}
}

// TestMetricLabelsBoundOfOne: with room for a single series, every job
// counts under queue "other", type "other".
func TestMetricLabelsBoundOfOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.MaxMetricLabels = 1 })
	e.enqueue(map[string]any{"type": "a", "queue": "q1"})
	e.enqueue(map[string]any{"type": "b", "queue": "q2"})
	enq := scrape(t, e, "kyu_jobs_enqueued_total")
	if len(enq) != 1 || enq[`{queue="other",type="other"}`] != 2 {
		t.Errorf("kyu_jobs_enqueued_total = %v; want only queue other, type other at 2", enq)
	}
}

// TestStoreAttemptCounters: attempts that end in the store without the
// server (a worker on a shared store) are invisible to the server's own
// counters but show in kyu_store_attempts_*_total, read from the store's
// statistics.
func TestStoreAttemptCounters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	now := time.Now()
	jobs := make([]backend.NewJob, 3)
	for i := range jobs {
		jobs[i] = backend.NewJob{Type: "direct", Queue: "direct", MaxAttempts: 1}
	}
	if _, err := e.store.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: now}); err != nil {
		t.Fatal(err)
	}
	claimed, err := e.store.Claim(ctx, backend.ClaimParams{Queues: []string{"direct"}, Max: 3, Lease: time.Minute, WorkerID: "bypass", Now: now})
	if err != nil || len(claimed.Jobs) != 3 {
		t.Fatalf("claim: %d jobs, %v; want 3", len(claimed.Jobs), err)
	}
	lease := func(j *backend.Job) backend.Lease { return backend.Lease{JobID: j.ID, Token: j.LeaseToken} }
	res, err := e.store.Complete(ctx, backend.CompleteParams{Now: now, Items: []backend.CompleteItem{
		{Lease: lease(claimed.Jobs[0])}, {Lease: lease(claimed.Jobs[1])},
	}})
	if err != nil || res.Errors[0] != nil || res.Errors[1] != nil {
		t.Fatalf("complete: %v %v", res.Errors, err)
	}
	res, err = e.store.Fail(ctx, backend.FailParams{Now: now, Items: []backend.FailItem{
		{Lease: lease(claimed.Jobs[2]), Message: "boom", Final: true},
	}})
	if err != nil || res.Errors[0] != nil {
		t.Fatalf("fail: %v %v", res.Errors, err)
	}

	if got := scrape(t, e, "kyu_store_attempts_processed_total")[""]; got != 3 {
		t.Errorf("kyu_store_attempts_processed_total = %v; want 3", got)
	}
	if got := scrape(t, e, "kyu_store_attempts_failed_total")[""]; got != 1 {
		t.Errorf("kyu_store_attempts_failed_total = %v; want 1", got)
	}
	if got := scrape(t, e, "kyu_jobs_completed_total"); len(got) != 0 {
		t.Errorf("kyu_jobs_completed_total = %v; want no series (nothing ended through the server)", got)
	}
	body := string(e.req("GET", "/metrics", nil).body)
	for _, want := range []string{"# TYPE kyu_store_attempts_processed_total counter", "# TYPE kyu_store_attempts_failed_total counter"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
