package main

import (
	"strings"
	"testing"
	"time"
)

func TestPayloadIs100BytesOfJSON(t *testing.T) {
	p := payload(100)
	if len(p) != 100 || !strings.HasPrefix(string(p), `{"p":"x`) || !strings.HasSuffix(string(p), `x"}`) {
		t.Fatalf("payload(100) = %q (%d bytes)", p, len(p))
	}
	if a := argsOf(p); len(a.P) != 100-len(`{"p":""}`) {
		t.Fatalf("River's argument holds %d bytes", len(a.P))
	}
}

func TestQuantile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i))
	}
	if q := quantile(s, 0.5); q != 50 {
		t.Errorf("p50 = %d, want 50", q)
	}
	if q := quantile(s, 0.99); q != 99 {
		t.Errorf("p99 = %d, want 99", q)
	}
	if q := quantile(nil, 0.5); q != 0 {
		t.Errorf("p50 of nothing = %d", q)
	}
}

func TestTableRatiosFavourKyuAboveOne(t *testing.T) {
	batch := 2000.0
	results := []result{
		{System: "kyu", Store: "redis", Round: 1, BatchPerSec: &batch, SinglePerSec: 1000, DrainPerSec: 4000, P50ms: 0.5, P99ms: 2},
		{System: "asynq", Store: "redis", Round: 1, SinglePerSec: 2000, DrainPerSec: 1000, P50ms: 1, P99ms: 1},
	}
	var b strings.Builder
	writeTables(&b, results, []roundMark{{Round: 1, Load: "1.00 1.00 1.00"}})
	out := b.String()
	for _, want := range []string{
		"| batch enqueue (jobs/s) | 2,000 | — | — |",
		"| single enqueue, 1 producer (jobs/s) | 1,000 | 2,000 | 0.50 |",
		"| drain (jobs/s) | 4,000 | 1,000 | 4.00 |",
		"| idle latency p50 (ms) | 0.50 | 1.00 | 2.00 |",
		"| idle latency p99 (ms) | 2.00 | 1.00 | 0.50 |",
		"load average 1.00 1.00 1.00",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "PostgreSQL") {
		t.Errorf("a table for a store without results:\n%s", out)
	}
}
