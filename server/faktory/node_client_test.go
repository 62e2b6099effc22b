package faktory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/remote"
	"github.com/kyuhq/kyu/server/faktory"
)

// nodeJobsEnv names the job count of TestNodeProducerAndWorker (default
// 10000).
const nodeJobsEnv = "KYU_TEST_NODE_JOBS"

// TestNodeProducerAndWorker: a Node producer pushes jobs (PUSHB), every
// tenth of which fails its first attempt, and a Node worker at
// concurrency 20 runs them all: each completes exactly once, and the
// failures show as a second attempt with the first one's error.
func TestNodeProducerAndWorker(t *testing.T) {
	e := newNodeEnv(t)
	n := envInt(t, nodeJobsEnv, 10000)
	w := e.start("worker.js", "CONCURRENCY=20", "WID=node-main")
	w.waitEvents("ready", 1, 30*time.Second)
	start := time.Now()
	e.push(n, fmt.Sprintf("COUNT=%d", n), "FAIL_EVERY=10", "PREFIX=main")
	e.waitCompleted("default", n, 2*time.Minute)
	t.Logf("%d jobs pushed and run in %v", n, time.Since(start).Round(time.Millisecond))

	first, again := jidsRun(w.events("run"))
	failing := 0
	for i := range n {
		jid := fmt.Sprintf("main-%d", i)
		want := 0
		if i%10 == 0 {
			want, failing = 1, failing+1
		}
		if first[jid] != 1 || again[jid] != want {
			t.Fatalf("%s ran %d times fresh and %d after a failure, want 1 and %d", jid, first[jid], again[jid], want)
		}
	}
	if len(first) != n {
		t.Fatalf("the worker ran %d distinct jobs, want %d", len(first), n)
	}
	// Every failing job: two attempts, the first one's error kept as the
	// client sent it; the REST API finds it by jid.
	for i := 0; i < n; i += 10 {
		j, err := e.store.Get(t.Context(), backend.GetParams{JID: fmt.Sprintf("main-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("FirstAttempt: first attempt of main-%d fails", i)
		if j.State != backend.StateCompleted || j.Attempt != 2 || len(j.Errors) != 1 || j.Errors[0].Message != want ||
			!strings.Contains(j.Errors[0].Stack, "worker.js") {
			t.Fatalf("main-%d: %s, attempt %d, errors %+v", i, j.State, j.Attempt, j.Errors)
		}
	}
	var got struct {
		ID      string `json:"id"`
		JID     string `json:"jid"`
		State   string `json:"state"`
		Attempt int    `json:"attempt"`
		Errors  []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	e.api(http.MethodGet, "/api/v1/jobs/main-10", &got)
	if got.JID != "main-10" || got.State != "completed" || got.Attempt != 2 || len(got.Errors) != 1 ||
		got.Errors[0].Message != "FirstAttempt: first attempt of main-10 fails" {
		t.Fatalf("GET /api/v1/jobs/main-10: %+v", got)
	}
	e.api(http.MethodPost, "/api/v1/workers/node-main/stop", nil)
	if err := w.wait(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// goBackend is a kyu store reached over the server's REST API, as a Go
// producer or worker in another process would reach it.
func (e *nodeEnv) goBackend() *remote.Backend {
	e.t.Helper()
	b, err := remote.Open(e.base, remote.Options{Token: nodeToken})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { b.Close() })
	return b
}

// TestNodeProducerGoWorker: jobs pushed by the Node client run on kyu's
// own Go Worker, their args its payload.
func TestNodeProducerGoWorker(t *testing.T) {
	e := newNodeEnv(t)
	const n = 50
	e.push(n, fmt.Sprintf("COUNT=%d", n), "PREFIX=go", "BATCH=20")

	var mu sync.Mutex
	seen := map[string]string{}
	w, err := kyu.NewWorker(e.goBackend(), kyu.WorkerConfig{
		Queues: map[string]int{"default": 4},
		Handler: kyu.HandlerFunc(func(ctx context.Context, j *kyu.Job) error {
			mu.Lock()
			defer mu.Unlock()
			seen[j.ID] = j.Type + " " + string(j.Payload)
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.waitCompleted("default", n, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		j, err := e.store.Get(t.Context(), backend.GetParams{JID: fmt.Sprintf("go-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := seen[j.ID], fmt.Sprintf("noop [%d]", i); got != want {
			t.Fatalf("go-%d ran as %q, want %q", i, got, want)
		}
	}
}

// TestGoClientNodeWorker: jobs enqueued with kyu's Go Client run on the
// Node worker, which sees their fields mapped to Faktory's.
func TestGoClientNodeWorker(t *testing.T) {
	e := newNodeEnv(t)
	c := kyu.NewClient(e.goBackend(), kyu.ClientConfig{})
	arr, err := c.EnqueueJSON(t.Context(), "echo", []any{"a", 1}, kyu.EnqueueOptions{
		Queue: "goq", Priority: 50, MaxAttempts: 3, Metadata: map[string]string{"tenant": "t1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := c.EnqueueJSON(t.Context(), "echo", map[string]any{"k": "v"}, kyu.EnqueueOptions{Queue: "goq", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	w := e.start("worker.js", "QUEUES=goq", "WID=node-go")
	runs := w.waitEvents("run", 2, 30*time.Second)
	e.waitCompleted("goq", 2, 30*time.Second)
	byJID := map[string]string{}
	for _, r := range runs {
		delete(r, "ev")
		b, _ := json.Marshal(r)
		byJID[r["jid"].(string)] = string(b)
	}
	// Priority 50 is Faktory's 7; three attempts are two retries; one
	// attempt kept failed is -1; metadata is custom; an object payload is
	// the one argument.
	for id, want := range map[string]string{
		arr.ID: `{"args":["a",1],"custom":{"tenant":"t1"},"failed":false,"jid":"` + arr.ID + `","jobtype":"echo","priority":7,"queue":"goq","retry":2}`,
		obj.ID: `{"args":[{"k":"v"}],"failed":false,"jid":"` + obj.ID + `","jobtype":"echo","queue":"goq","retry":-1}`,
	} {
		if byJID[id] != want {
			t.Errorf("the Node worker saw\n%s\nwant\n%s", byJID[id], want)
		}
	}
	e.api(http.MethodPost, "/api/v1/workers/node-go/stop", nil)
	if err := w.wait(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestNodeWorkerQuietTerminate: an operator's quiet and stop reach the
// Node worker through BEAT: it quiets (fetches nothing more, stays up),
// then stops and exits, and its registry entry goes.
func TestNodeWorkerQuietTerminate(t *testing.T) {
	e := newNodeEnv(t)
	w := e.start("worker.js", "WID=node-q", "BEAT_INTERVAL=0.2")
	w.waitEvents("ready", 1, 30*time.Second)
	e.api(http.MethodPost, "/api/v1/workers/node-q/quiet", nil)
	w.waitEvents("quiet", 1, 10*time.Second)
	if got := w.events("beat"); len(got) == 0 || got[0]["state"] != "quiet" {
		t.Fatalf("beats %v, want quiet first", got)
	}
	// A job pushed now stays pending: the quiet worker does not take it.
	e.push(1, "COUNT=1", "PREFIX=late")
	e.api(http.MethodPost, "/api/v1/workers/node-q/stop", nil)
	w.waitEvents("exit", 1, 10*time.Second)
	if err := w.wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := w.events("beat"); got[len(got)-1]["state"] != "terminate" {
		t.Fatalf("beats %v, want terminate last", got)
	}
	if runs := w.events("run"); len(runs) != 0 {
		t.Fatalf("the quiet worker ran %v", runs)
	}
	if c := e.counts("default"); c["pending"] != 1 {
		t.Fatalf("counts after the worker stopped %v, want the job pending", c)
	}
	waitFor(t, "the worker's entry to go", 10*time.Second, func() bool {
		ws, err := e.store.Workers(t.Context(), backend.WorkersParams{Now: time.Now()})
		return err == nil && len(ws) == 0
	})
}

// TestNodeWorkerTerminateWhileFetching: a job that arrives while the
// Node worker stops (its FETCH still waiting on another connection) is
// not handed to it, where it would sit leased to a gone worker until its
// reserve_for ran out: it stays pending for the next worker.
func TestNodeWorkerTerminateWhileFetching(t *testing.T) {
	e := newNodeEnv(t)
	w := e.start("worker.js", "WID=node-t", "BEAT_INTERVAL=0.2")
	w.waitEvents("ready", 1, 30*time.Second)
	e.api(http.MethodPost, "/api/v1/workers/node-t/stop", nil)
	w.waitEvents("beat", 1, 10*time.Second)
	// The worker's FETCH waits up to 2 s; a job enqueued now wakes it.
	if _, err := e.store.Enqueue(t.Context(), backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{{Type: "noop", Payload: []byte("[]")}}}); err != nil {
		t.Fatal(err)
	}
	w.waitEvents("exit", 1, 10*time.Second)
	if err := w.wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if c := e.counts("default"); c["pending"] != 1 {
		t.Fatalf("counts after the worker stopped %v, want the job pending", c)
	}
}

// TestNodeWorkerKilled: a Node worker killed with SIGKILL in the middle
// of its jobs loses none: they run again on another worker once their
// reserve_for (2 s) has passed, the lost attempt recorded.
func TestNodeWorkerKilled(t *testing.T) {
	e := newNodeEnv(t)
	const n = 10
	e.push(n, fmt.Sprintf("COUNT=%d", n), "PREFIX=kill", "JOBTYPE=hangOnce", "RESERVE_FOR=2")
	a := e.start("worker.js", "WID=node-a")
	a.waitEvents("run", n, 30*time.Second)
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-a.done
	b := e.start("worker.js", "WID=node-b")
	e.waitCompleted("default", n, 30*time.Second)
	first, again := jidsRun(b.events("run"))
	for i := range n {
		jid := fmt.Sprintf("kill-%d", i)
		if first[jid] != 0 || again[jid] != 1 {
			t.Fatalf("%s ran %d times fresh and %d after a failure on the second worker, want 0 and 1", jid, first[jid], again[jid])
		}
		j, err := e.store.Get(t.Context(), backend.GetParams{JID: jid})
		if err != nil {
			t.Fatal(err)
		}
		if j.State != backend.StateCompleted || j.Attempt != 2 || len(j.Errors) != 1 || j.Errors[0].Kind != backend.AttemptLeaseExpired {
			t.Fatalf("%s: %s, attempt %d, errors %+v; second worker's runs %v, stderr:\n%s", jid, j.State, j.Attempt, j.Errors, b.events("run"), b.stderr.String())
		}
		// The second attempt began after the first one's reserve_for.
		if lease := j.Errors[0].At; j.StartedAt.Before(lease) {
			t.Fatalf("%s ran again at %v, before its lease was given up at %v", jid, j.StartedAt, lease)
		}
	}
	t.Logf("all %d jobs ran again %v after the kill", n, time.Since(killed).Round(time.Millisecond))
	e.api(http.MethodPost, "/api/v1/workers/node-b/stop", nil)
	if err := b.wait(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestNodePushFieldsInAPI: jobs pushed one by one with the Node client's
// job builder are ordinary kyu jobs in the REST API, each field mapped.
func TestNodePushFieldsInAPI(t *testing.T) {
	e := newNodeEnv(t)
	jobs := []map[string]any{
		{"jid": "fields-1", "jobtype": "Report", "args": []any{"a", 2, map[string]any{"x": true}}, "queue": "reports",
			"priority": 9, "retry": 4, "reserve_for": 90, "custom": map[string]any{"tenant": 7, "tags": []string{"a"}},
			"at": "2099-01-02T03:04:05.000Z"},
		{"jid": "fields-2", "jobtype": "Mail", "args": []any{}, "priority": 1, "retry": -1},
		{"jid": "fields-3", "jobtype": "Mail"},
	}
	raw, _ := json.Marshal(jobs)
	e.push(len(jobs), "JOBS="+string(raw))
	type apiJob struct {
		ID          string            `json:"id"`
		JID         string            `json:"jid"`
		Type        string            `json:"type"`
		Queue       string            `json:"queue"`
		State       string            `json:"state"`
		Priority    int               `json:"priority"`
		MaxAttempts int               `json:"max_attempts"`
		RunAt       time.Time         `json:"run_at"`
		Timeout     string            `json:"timeout"`
		Retention   string            `json:"retention"`
		Payload     json.RawMessage   `json:"payload"`
		Metadata    map[string]string `json:"metadata"`
	}
	for _, c := range []struct {
		jid  string
		want apiJob
	}{
		{"fields-1", apiJob{JID: "fields-1", Type: "Report", Queue: "reports", State: "scheduled", Priority: 100, MaxAttempts: 5,
			RunAt: time.Date(2099, 1, 2, 3, 4, 5, 0, time.UTC), Timeout: "1m30s", Retention: "default",
			Payload: json.RawMessage(`["a",2,{"x":true}]`), Metadata: map[string]string{faktory.MetaCustom: `{"tags":["a"],"tenant":7}`}}},
		{"fields-2", apiJob{JID: "fields-2", Type: "Mail", Queue: "default", State: "pending", Priority: -100, MaxAttempts: 1,
			Timeout: "30m0s", Retention: "default", Payload: json.RawMessage(`[]`)}},
		{"fields-3", apiJob{JID: "fields-3", Type: "Mail", Queue: "default", State: "pending", Priority: 0, MaxAttempts: 26,
			Timeout: "30m0s", Retention: "default", Payload: json.RawMessage(`[]`)}},
	} {
		var got apiJob
		e.api(http.MethodGet, "/api/v1/jobs/"+c.jid, &got)
		if got.ID == "" || got.ID == c.jid {
			t.Fatalf("%s: kyu id %q, want its own", c.jid, got.ID)
		}
		got.ID = ""
		if !got.RunAt.Equal(c.want.RunAt) && !c.want.RunAt.IsZero() {
			t.Errorf("%s: run_at %v, want %v", c.jid, got.RunAt, c.want.RunAt)
		}
		got.RunAt, c.want.RunAt = time.Time{}, time.Time{}
		delete(got.Metadata, faktory.MetaCreatedAt)
		if len(got.Metadata) == 0 {
			got.Metadata = nil
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(c.want)
		if string(g) != string(w) {
			t.Errorf("%s in the API:\n%s\nwant\n%s", c.jid, g, w)
		}
	}
}

// TestNodePassword: the Node client proves the password (the server's
// token); a wrong one or none is refused, and the client errors.
func TestNodePassword(t *testing.T) {
	e := newNodeEnv(t)
	one := `JOBS=[{"jid":"pw-1","jobtype":"t"}]`
	e.push(1, one)
	if _, err := e.store.Get(t.Context(), backend.GetParams{JID: "pw-1"}); err != nil {
		t.Fatal(err)
	}
	addr := e.srv.FaktoryAddr().String()
	for _, url := range []string{"tcp://:wrong@" + addr, "tcp://" + addr} {
		_, err := e.run(30*time.Second, "producer.js", "FAKTORY_URL="+url, `JOBS=[{"jid":"pw-2","jobtype":"t"}]`)
		if err == nil || !strings.Contains(err.Error(), "Invalid password") && !strings.Contains(err.Error(), "password") {
			t.Fatalf("producer with %s: %v, want a refused password", url, err)
		}
	}
	if _, err := e.store.Get(t.Context(), backend.GetParams{JID: "pw-2"}); err == nil {
		t.Fatal("a job pushed with a wrong password was taken")
	}
}
