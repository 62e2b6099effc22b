package server_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server"
)

// rssLimit is the documented bound on the peak RSS of `kyu server` under
// the worst requests its default limits allow, four at a time, with its
// default settings (docs/benchmarks.md): among them its soft memory limit
// and the gate on large request bodies. The server inherits the test's
// environment, so KYU_MEMORY_LIMIT or GOMEMLIMIT set for the test applies
// to it too.
const rssLimit = 512 << 20

// TestPeakRSS builds the kyu binary, starts `kyu server` over a fresh
// embedded store for each group of requests, sends it the worst requests
// the default limits allow, four at a time, and reads the server's peak
// RSS (VmHWM) from /proc. It runs only with KYU_TEST_RSS=1 (it writes
// several hundred MB and takes about half a minute), and outside the race
// detector, which inflates memory:
//
//	KYU_TEST_RSS=1 go test -run TestPeakRSS -v -timeout 30m ./server/
func TestPeakRSS(t *testing.T) {
	if os.Getenv("KYU_TEST_RSS") != "1" {
		t.Skip("set KYU_TEST_RSS=1 to measure the server's peak RSS")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "kyu")
	build := exec.Command("go", "build", "-o", bin, "github.com/kyuhq/kyu/cmd/kyu")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("go build: %v", err)
	}
	start := func(name string) *rssRun {
		cmd := exec.Command(bin, "server", "--addr", "127.0.0.1:0", "--backend", "pebble://"+filepath.Join(dir, name))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Signal(os.Interrupt)
			cmd.Wait()
		})
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			t.Fatalf("read the server's address: %v", err)
		}
		fields := strings.Fields(line) // kyu server listening on http://ADDR (backend …)
		if len(fields) < 5 {
			t.Fatalf("unexpected first line: %q", line)
		}
		return &rssRun{t: t, name: name, base: fields[4], pid: cmd.Process.Pid, hc: &http.Client{Timeout: 5 * time.Minute}}
	}
	var peak int64
	stop := func(r *rssRun) {
		hwm := r.status("VmHWM")
		t.Logf("%s: peak RSS (VmHWM) %.1f MiB", r.name, float64(hwm)/(1<<20))
		peak = max(peak, hwm)
	}

	bodyMax := (backend.DefaultMaxPayload+2)/3*4 + 1<<20
	tiny := batchBody(server.DefaultMaxBatch, `{"type":"t","queue":"idem"}`)
	title := strings.Repeat("t", backend.MaxTitle)
	fill := bodyMax/server.DefaultMaxBatch - len(`{"type":"t","queue":"wide","title":"`+title+`","payload":""},`) - 1
	wide := batchBody(server.DefaultMaxBatch, `{"type":"t","queue":"wide","title":"`+title+`","payload":"`+strings.Repeat("p", fill)+`"}`)
	tags := make([]string, backend.MaxTags)
	for i := range tags {
		tags[i] = fmt.Sprintf("%0*d", backend.MaxTag, i)
	}
	fat, _ := json.Marshal(map[string]any{"type": "t", "queue": "fat", "title": title, "tags": tags,
		"metadata": map[string]string{"k": strings.Repeat("m", backend.MaxMetadata-1)}})
	fatPerBatch := bodyMax / (len(fat) + 1)
	fatBatch := batchBody(fatPerBatch, string(fat))
	if len(wide) > bodyMax || len(fatBatch) > bodyMax {
		t.Fatalf("bodies of %d and %d bytes are over the limit of %d", len(wide), len(fatBatch), bodyMax)
	}

	// Keyed batches of the largest answer (10,000 items), enough to fill
	// the Idempotency-Key cache's 64 MiB. The items share a unique key,
	// so that the store holds one job per batch: the cache is measured,
	// not a store of millions of pending jobs.
	r := start("idempotency")
	r.phase("keyed batches of 10,000 jobs", 100, func(i int) {
		body := strings.ReplaceAll(tiny, `"queue":"idem"`, `"queue":"idem","unique_key":"u`+strconv.Itoa(i)+`"`)
		r.post("/api/v1/jobs", body, http.StatusCreated, "Idempotency-Key", "key-"+strconv.Itoa(i))
	})
	stop(r)
	r = start("batches")
	r.phase("batches of 10,000 jobs filling the body limit", 8, func(int) {
		r.post("/api/v1/jobs", wide, http.StatusCreated)
	})
	stop(r)
	r = start("lists")
	r.phase("batches of jobs with the largest title, tags and metadata", 6, func(int) {
		r.post("/api/v1/jobs", fatBatch, http.StatusCreated)
	})
	r.phase("list pages of 1000 such jobs", 12, func(int) {
		r.get("/api/v1/jobs?queue=fat&limit=1000")
	})
	stop(r)
	r = start("claims")
	payload := make([]byte, backend.DefaultMaxPayload)
	rand.Read(payload)
	big := `{"type":"t","queue":"big","payload_b64":"` + base64.StdEncoding.EncodeToString(payload) + `"}`
	r.phase("enqueues of the largest payload", 8, func(int) {
		r.post("/api/v1/jobs", big, http.StatusCreated)
	})
	result := `{"lease_token":%d,"result_b64":"` + base64.StdEncoding.EncodeToString(payload) + `"}`
	var mu sync.Mutex
	var done []string
	r.phase("claims of 1000 jobs of the largest payload, completed with the largest result", 4, func(int) {
		for {
			var out struct {
				Jobs []struct {
					ID         string `json:"id"`
					LeaseToken int64  `json:"lease_token"`
				}
			}
			json.Unmarshal(r.post("/api/v1/claim", `{"queues":["big"],"max":1000}`, http.StatusOK), &out)
			if len(out.Jobs) == 0 {
				return
			}
			for _, j := range out.Jobs {
				r.post("/api/v1/jobs/"+j.ID+"/complete", fmt.Sprintf(result, j.LeaseToken), http.StatusOK)
				mu.Lock()
				done = append(done, j.ID)
				mu.Unlock()
			}
		}
	})
	if len(done) != 8 {
		t.Fatalf("claimed and completed %d of 8 large jobs", len(done))
	}
	r.phase("waits on jobs with the largest payload and result", 16, func(i int) {
		r.get("/api/v1/jobs/" + done[i%len(done)] + "/wait?timeout=0s")
	})
	stop(r)
	t.Logf("peak RSS (VmHWM) of kyu server: %.1f MiB; bound %d MiB", float64(peak)/(1<<20), rssLimit>>20)
	if peak > rssLimit {
		t.Fatalf("peak RSS %.1f MiB is over the documented %d MiB", float64(peak)/(1<<20), rssLimit>>20)
	}
}

// rssRun drives one server for TestPeakRSS.
type rssRun struct {
	t    *testing.T
	name string
	base string
	pid  int
	hc   *http.Client
}

// phase runs n calls of fn, four at a time, and logs the server's RSS.
func (r *rssRun) phase(name string, n int, fn func(i int)) {
	start := time.Now()
	var wg sync.WaitGroup
	next := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	r.t.Logf("%-70s %6.1fs  RSS %6.1f MiB  peak %6.1f MiB", name, time.Since(start).Seconds(),
		float64(r.status("VmRSS"))/(1<<20), float64(r.status("VmHWM"))/(1<<20))
}

// post sends body and returns the answer, failing on another status.
func (r *rssRun) post(path, body string, want int, headers ...string) []byte {
	req, err := http.NewRequest("POST", r.base+path, strings.NewReader(body))
	if err != nil {
		r.t.Error(err)
		return nil
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return r.do(req, want)
}

// get reads path.
func (r *rssRun) get(path string) []byte {
	req, err := http.NewRequest("GET", r.base+path, nil)
	if err != nil {
		r.t.Error(err)
		return nil
	}
	return r.do(req, http.StatusOK)
}

func (r *rssRun) do(req *http.Request, want int) []byte {
	resp, err := r.hc.Do(req)
	if err != nil {
		r.t.Errorf("%s %s: %v", req.Method, req.URL.Path, err)
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != want {
		r.t.Errorf("%s %s: %d %.300s (%v); want %d", req.Method, req.URL.Path, resp.StatusCode, b, err, want)
	}
	return b
}

// status reads a size in bytes from /proc/<pid>/status (VmRSS, VmHWM).
func (r *rssRun) status(field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.pid))
	if err != nil {
		r.t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				r.t.Fatal(err)
			}
			return kb << 10
		}
	}
	r.t.Fatalf("no %s in /proc/%d/status", field, r.pid)
	return 0
}

// batchBody is a JSON array of n copies of item.
func batchBody(n int, item string) string {
	var b bytes.Buffer
	b.Grow(n * (len(item) + 1))
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
	}
	b.WriteByte(']')
	return b.String()
}
