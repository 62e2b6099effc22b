package faktory_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/backendtest"
	"github.com/kyuhq/kyu/backend/memory"
	"github.com/kyuhq/kyu/server"
)

// The tests in node_*_test.go drive kyu's Faktory listener with the npm
// package faktory-worker, a client written by others, through the
// scripts in testdata/node. The package is installed once per test binary
// from the committed lock file (npm ci) into a temporary directory;
// without node and npm the tests skip, or fail under KYU_TEST_REQUIRE=all
// (or =node).

// nodeToken is the server's token, and so the Faktory password.
const nodeToken = "node-test-token"

// nodeInstall is the directory the Node project was installed into, set
// once by installNode; TestMain removes it.
type nodeInstall struct {
	once sync.Once
	dir  string
	err  error
}

// nodeProject is this test binary's installation of testdata/node.
var nodeProject nodeInstall

func TestMain(m *testing.M) {
	code := m.Run()
	if nodeProject.dir != "" {
		os.RemoveAll(nodeProject.dir)
	}
	os.Exit(code)
}

// nodeDir returns the directory holding the installed Node scripts,
// installing them on first use; it skips (or fails, when required) the
// test when node or npm is missing.
func nodeDir(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := "no " + tool + " on PATH (Debian: apt-get install nodejs npm); the Faktory Node client tests need it"
			if backendtest.Required("node") {
				t.Fatalf("%s; %s requires it", msg, backendtest.RequireEnv)
			}
			t.Skipf("%s; set %s=all to make this a failure", msg, backendtest.RequireEnv)
		}
	}
	nodeProject.once.Do(func() { nodeProject.dir, nodeProject.err = installNode() })
	if nodeProject.err != nil {
		t.Fatal(nodeProject.err)
	}
	return nodeProject.dir
}

// installNode copies testdata/node's package files and scripts into a
// temporary directory and runs npm ci there.
func installNode() (string, error) {
	dir, err := os.MkdirTemp("", "kyu-faktory-node-")
	if err != nil {
		return "", err
	}
	files, err := filepath.Glob(filepath.Join("testdata", "node", "*.js*"))
	if err != nil {
		return dir, err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return dir, err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			return dir, err
		}
	}
	cmd := exec.Command("npm", "ci", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error")
	if out, err := cmd.CombinedOutput(); err != nil {
		return dir, fmt.Errorf("npm ci in %s: %w\n%s", dir, err, out)
	}
	return dir, nil
}

// nodeEnv is a kyu server, with its Faktory listener, over the memory
// store, for the Node client.
type nodeEnv struct {
	t     *testing.T
	dir   string
	srv   *server.Server
	store backend.Backend
	base  string
	// url is FAKTORY_URL for the Node scripts, with the password.
	url string
}

// newNodeEnv starts a server over the memory store with a Faktory
// listener on free ports, its password the token, and maintenance every
// 50 ms (so that expired leases are recovered soon after their
// reserve_for).
func newNodeEnv(t *testing.T) *nodeEnv {
	t.Helper()
	store := memory.New()
	t.Cleanup(func() { store.Close() })
	return newNodeEnvOver(t, store)
}

// newNodeEnvOver is newNodeEnv over the given store.
func newNodeEnvOver(t *testing.T, store backend.Backend) *nodeEnv {
	t.Helper()
	dir := nodeDir(t)
	srv, err := server.New(server.Config{
		Backend: store, Addr: "127.0.0.1:0", Token: nodeToken, FaktoryAddr: "127.0.0.1:0",
		MaintenanceInterval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	<-srv.Ready()
	return &nodeEnv{
		t: t, dir: dir, srv: srv, store: store, base: "http://" + srv.Addr().String(),
		url: "tcp://:" + nodeToken + "@" + srv.FaktoryAddr().String(),
	}
}

// api sends a request to the REST API and decodes a 2xx answer into v
// (when not nil); any other status fails the test.
func (e *nodeEnv) api(method, path string, v any) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.base+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+nodeToken)
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	body := buf.Bytes()
	if resp.StatusCode/100 != 2 {
		e.t.Fatalf("%s %s answered %d: %s", method, path, resp.StatusCode, body)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			e.t.Fatalf("%s %s: %v\n%s", method, path, err, body)
		}
	}
}

// counts returns the job counts per state of a queue, from the REST API.
func (e *nodeEnv) counts(queue string) map[string]int {
	e.t.Helper()
	var qs struct {
		Queues []struct {
			Name   string         `json:"name"`
			Counts map[string]int `json:"counts"`
		} `json:"queues"`
	}
	e.api(http.MethodGet, "/api/v1/queues", &qs)
	for _, q := range qs.Queues {
		if q.Name == queue {
			return q.Counts
		}
	}
	return map[string]int{}
}

// waitCompleted waits, up to d, until queue holds n completed jobs and
// nothing else.
func (e *nodeEnv) waitCompleted(queue string, n int, d time.Duration) {
	e.t.Helper()
	var last map[string]int
	deadline := time.Now().Add(d)
	for {
		last = e.counts(queue)
		done := last["completed"] == n
		for state, c := range last {
			if state != "completed" && c != 0 {
				done = false
			}
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("after %v queue %s holds %v, want %d completed", d, queue, last, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// nodeProc is a running Node script whose stdout lines are collected.
type nodeProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan struct{}

	mu    sync.Mutex
	lines []map[string]any
}

// start runs script with FAKTORY_URL and the extra environment given as
// KEY=value; the process is killed at the test's end if still running.
func (e *nodeEnv) start(script string, env ...string) *nodeProc {
	e.t.Helper()
	cmd := exec.Command("node", filepath.Join(e.dir, script))
	cmd.Dir = e.dir
	// Beats every half second, so that quiet and stop reach workers soon.
	cmd.Env = append(os.Environ(), "FAKTORY_URL="+e.url, "BEAT_INTERVAL=0.5")
	cmd.Env = append(cmd.Env, env...)
	p := &nodeProc{t: e.t, cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			var line map[string]any
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				line = map[string]any{"ev": "text", "text": sc.Text()}
			}
			p.mu.Lock()
			p.lines = append(p.lines, line)
			p.mu.Unlock()
		}
		cmd.Wait()
	}()
	e.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
		<-p.done
	})
	return p
}

// run runs script to its end (within d) and returns its stdout lines and
// its error.
func (e *nodeEnv) run(d time.Duration, script string, env ...string) (*nodeProc, error) {
	e.t.Helper()
	p := e.start(script, env...)
	return p, p.wait(d)
}

// wait waits up to d for the process to exit and returns its error.
func (p *nodeProc) wait(d time.Duration) error {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		p.cmd.Process.Kill()
		<-p.done
		p.t.Fatalf("%s still running after %v; stderr:\n%s", p.cmd.Args[1], d, p.stderr.String())
	}
	if err := p.cmd.ProcessState.ExitCode(); err != 0 {
		return fmt.Errorf("%s exited %d: %s", filepath.Base(p.cmd.Args[1]), err, p.stderr.String())
	}
	return nil
}

// events returns the lines whose "ev" is ev.
func (p *nodeProc) events(ev string) []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []map[string]any
	for _, l := range p.lines {
		if l["ev"] == ev {
			out = append(out, l)
		}
	}
	return out
}

// waitEvents waits up to d until the process has written n lines of ev,
// and returns them.
func (p *nodeProc) waitEvents(ev string, n int, d time.Duration) []map[string]any {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := p.events(ev)
		if len(got) >= n {
			return got
		}
		select {
		case <-p.done:
			p.t.Fatalf("%s exited with %d %q lines of %d; stderr:\n%s", p.cmd.Args[1], len(got), ev, n, p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%d %q lines of %d after %v; stderr:\n%s", len(got), ev, n, d, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// push runs the producer with env and fails unless it pushed n jobs.
func (e *nodeEnv) push(n int, env ...string) {
	e.t.Helper()
	p, err := e.run(2*time.Minute, "producer.js", env...)
	if err != nil {
		e.t.Fatal(err)
	}
	if got := p.events("pushed"); len(got) != 1 || got[0]["n"] != float64(n) {
		e.t.Fatalf("producer wrote %v, want %d jobs pushed", p.lines, n)
	}
}

// envInt returns the integer in the environment variable name, or def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var n int
	if _, err := fmt.Sscan(v, &n); err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive count", name, v)
	}
	return n
}

// jidsRun counts the run lines of each jid, split by whether the run
// carried an earlier failure.
func jidsRun(runs []map[string]any) (first, again map[string]int) {
	first, again = map[string]int{}, map[string]int{}
	for _, r := range runs {
		jid, _ := r["jid"].(string)
		if r["failed"] == true {
			again[jid]++
		} else {
			first[jid]++
		}
	}
	return first, again
}
