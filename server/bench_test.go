package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu/internal/cputime"
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
// jobs per second (jobsPerOp jobs each) and the process's CPU time per job
// (clients, server and store together; less sensitive than the rate to
// other load on a shared machine).
func runClients(b *testing.B, jobsPerOp int, op func()) {
	var left atomic.Int64
	left.Store(int64(b.N))
	b.ResetTimer()
	start, cpu := time.Now(), cputime.Process()
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
		if used := cputime.Process() - cpu; used > 0 {
			b.ReportMetric(float64(used.Microseconds())/float64(b.N*jobsPerOp), "cpu-µs/job")
		}
	}
}

// BenchmarkEnqueueHandler: one job per request through the server's
// handler called in-process (no connections, no HTTP client), from 50
// goroutines, over the embedded store: what the server's own code costs
// per request, allocations included.
func BenchmarkEnqueueHandler(b *testing.B) {
	srv, err := server.New(server.Config{Backend: openStoreTB(b), Addr: "127.0.0.1:0", MaintenanceInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	body := []byte(`{"type":"bench","queue":"bench","payload":{"n":"` + string(bytes.Repeat([]byte("x"), 80)) + `"}}`)
	b.SetParallelism((benchClients + 1) / 2)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Process()
	defer func() {
		if used := cputime.Process() - cpu; used > 0 {
			b.ReportMetric(float64(used.Microseconds())/float64(b.N), "cpu-µs/job")
		}
	}()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest("POST", "/api/v1/jobs", bytes.NewReader(body))
			req.Host = "127.0.0.1" // a server without a token answers loopback names only
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusCreated {
				b.Errorf("enqueue: %d %s", rec.Code, rec.Body)
				return
			}
		}
	})
}

// BenchmarkEnqueue: one job per request from 50 clients.
func BenchmarkEnqueue(b *testing.B) {
	base, hc := benchServer(b)
	body := []byte(`{"type":"bench","queue":"bench","payload":{"n":"` + string(bytes.Repeat([]byte("x"), 80)) + `"}}`)
	runClients(b, 1, func() { post(b, hc, base+"/api/v1/jobs", body, 201) })
}

// BenchmarkEnqueueLeanClient: BenchmarkEnqueue's load (one job per
// request, 50 keep-alive connections, the same body) sent by a minimal
// HTTP/1.1 client that writes a pre-built request and reads the answer by
// its Content-Length, as load generators such as wrk do. net/http's client
// takes about a third of the process's CPU in BenchmarkEnqueue; with
// this one the two shared cores go mostly to the server, closer to the
// case of clients on other machines.
func BenchmarkEnqueueLeanClient(b *testing.B) {
	base, _ := benchServer(b)
	addr := strings.TrimPrefix(base, "http://")
	body := `{"type":"bench","queue":"bench","payload":{"n":"` + strings.Repeat("x", 80) + `"}}`
	req := []byte("POST /api/v1/jobs HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	conns := make(chan *leanConn, benchClients)
	for range benchClients {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		conns <- &leanConn{c: c, r: bufio.NewReader(c)}
	}
	runClients(b, 1, func() {
		c := <-conns
		defer func() { conns <- c }()
		if err := c.roundTrip(req, "201"); err != nil {
			b.Error(err)
		}
	})
}

// leanConn is one keep-alive connection of BenchmarkEnqueueLeanClient.
type leanConn struct {
	c net.Conn
	r *bufio.Reader
}

// roundTrip sends req and reads one answer, which must have status.
func (c *leanConn) roundTrip(req []byte, status string) error {
	if _, err := c.c.Write(req); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return fmt.Errorf("read status: %w", err)
	}
	if !bytes.HasPrefix(line, []byte("HTTP/1.1 "+status+" ")) {
		return fmt.Errorf("answer %q; want status %s", line, status)
	}
	n := -1
	for {
		h, err := c.r.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("read header: %w", err)
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		if v, ok := bytes.CutPrefix(h, []byte("Content-Length: ")); ok {
			if n, err = strconv.Atoi(string(v)); err != nil {
				return fmt.Errorf("content length %q: %w", v, err)
			}
		}
	}
	if n < 0 {
		return errors.New("answer without Content-Length")
	}
	if _, err := c.r.Discard(n); err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	return nil
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
