package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu/server"
)

// benchClients is how many concurrent HTTP clients the benchmarks run, as
// the load figure asks (50 clients with keep-alive).
const benchClients = 50

// benchServer starts a server over a fresh embedded store and returns its
// base URL and a keep-alive client sized for benchClients.
func benchServer(b *testing.B) (string, *http.Client) {
	b.Helper()
	srv, err := server.New(server.Config{Backend: openStoreTB(b), Addr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 2 * benchClients
	return "http://" + srv.Addr().String(), &http.Client{Transport: t}
}

// post sends body and checks the status.
func post(b *testing.B, hc *http.Client, url string, body []byte, want int) []byte {
	resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		b.Fatalf("POST %s: %d %s", url, resp.StatusCode, raw)
	}
	return raw
}

// runClients runs n operations over benchClients goroutines and reports
// jobs per second (jobsPerOp jobs each).
func runClients(b *testing.B, jobsPerOp int, op func()) {
	var left atomic.Int64
	left.Store(int64(b.N))
	b.ResetTimer()
	start := time.Now()
	done := make(chan struct{})
	for range benchClients {
		go func() {
			defer func() { done <- struct{}{} }()
			for left.Add(-1) >= 0 {
				op()
			}
		}()
	}
	for range benchClients {
		<-done
	}
	if jobsPerOp > 0 {
		b.ReportMetric(float64(b.N*jobsPerOp)/time.Since(start).Seconds(), "jobs/s")
	}
}

// BenchmarkEnqueue: one job per request from 50 clients.
func BenchmarkEnqueue(b *testing.B) {
	base, hc := benchServer(b)
	body := []byte(`{"type":"bench","queue":"bench","payload":{"n":"` + string(bytes.Repeat([]byte("x"), 80)) + `"}}`)
	runClients(b, 1, func() { post(b, hc, base+"/api/v1/jobs", body, 201) })
}

// BenchmarkEnqueueBatch: 100 jobs per request from 50 clients.
func BenchmarkEnqueueBatch(b *testing.B) {
	base, hc := benchServer(b)
	var items []string
	for range 100 {
		items = append(items, `{"type":"bench","queue":"bench","payload":{"n":"`+string(bytes.Repeat([]byte("x"), 80))+`"}}`)
	}
	body := []byte("[" + join(items) + "]")
	runClients(b, 100, func() { post(b, hc, base+"/api/v1/jobs", body, 201) })
}

// BenchmarkClaimComplete: jobs enqueued beforehand are claimed 100 at a
// time and completed in one batch request each, by 50 clients; an op is
// one claim plus one complete of up to 100 jobs.
func BenchmarkClaimComplete(b *testing.B) {
	base, hc := benchServer(b)
	const per = 100
	var items []string
	for range per {
		items = append(items, `{"type":"bench","queue":"bench","payload":{}}`)
	}
	batch := []byte("[" + join(items) + "]")
	for range b.N {
		post(b, hc, base+"/api/v1/jobs", batch, 201)
	}
	claim := []byte(fmt.Sprintf(`{"queues":["bench"],"max":%d,"lease":"1m","worker":"bench"}`, per))
	var total atomic.Int64
	runClients(b, 0, func() {
		var res struct {
			Jobs []struct {
				ID         string `json:"id"`
				LeaseToken int64  `json:"lease_token"`
			}
		}
		if err := json.Unmarshal(post(b, hc, base+"/api/v1/claim", claim, 200), &res); err != nil {
			b.Fatal(err)
		}
		if len(res.Jobs) == 0 {
			return
		}
		var done []map[string]any
		for _, j := range res.Jobs {
			done = append(done, map[string]any{"id": j.ID, "lease_token": j.LeaseToken})
		}
		body, _ := json.Marshal(map[string]any{"items": done})
		post(b, hc, base+"/api/v1/leases/complete", body, 200)
		total.Add(int64(len(res.Jobs)))
	})
	if got := total.Load(); got != int64(b.N*per) {
		b.Fatalf("claimed and completed %d jobs; want %d", got, b.N*per)
	}
	b.ReportMetric(float64(total.Load())/b.Elapsed().Seconds(), "completed/s")
}

// join joins JSON items with commas.
func join(items []string) string {
	var buf bytes.Buffer
	for i, it := range items {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(it)
	}
	return buf.String()
}
