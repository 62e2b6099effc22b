package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/backendtest"
	"github.com/kyuhq/kyu/backend/pebble"
	"github.com/kyuhq/kyu/backend/remote"
	"github.com/kyuhq/kyu/server"
)

// The tests in this file drive a real headless Chromium through chromedp
// against a kyu server over a fresh embedded store. Every test listens
// for JavaScript exceptions, console errors and failed requests on every
// page it opens, and fails on any it did not expect.

const browserToken = "browser-test-token"

// screenshotsEnv names a folder the tests write a screenshot of each page
// to.
const screenshotsEnv = "KYU_DASHBOARD_SCREENSHOTS"

// chromium returns the path of a Chromium or Chrome binary, or skips the
// test (fails it under KYU_TEST_REQUIRE=all or =chromium).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH (Debian: apt-get install chromium); the dashboard's browser tests need one"
	if backendtest.Required("chromium") {
		t.Fatalf("%s; %s requires it", msg, backendtest.RequireEnv)
	}
	t.Skipf("%s; set %s=all to make this a failure", msg, backendtest.RequireEnv)
	return ""
}

// browser is one test's server and browser tab.
type browser struct {
	t     *testing.T
	srv   *server.Server
	store backend.Backend
	base  string
	// apiBase is where api calls go; default base.
	apiBase string
	token   string
	ctx     context.Context

	mu       sync.Mutex
	problems []string
	// allowed are statuses the test provokes on purpose.
	allowed map[int]bool
}

// newBrowser starts a server (change adjusts its Config) and a headless
// Chromium tab that records every problem of the pages it shows.
func newBrowser(t *testing.T, change func(*server.Config)) *browser {
	t.Helper()
	exe := chromium(t)
	store, err := pebble.Open(t.TempDir(), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cfg := server.Config{Backend: store, Addr: "127.0.0.1:0", Token: browserToken, Store: "embedded store (pebble) in a test directory",
		EventInterval: 200 * time.Millisecond, MaintenanceInterval: 100 * time.Millisecond}
	if change != nil {
		change(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	base := "http://" + srv.Addr().String() + cfg.BasePath
	b := &browser{t: t, srv: srv, store: store, base: base, apiBase: base, token: cfg.Token, allowed: map[int]bool{}}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1280, 900), chromedp.UserDataDir(t.TempDir()))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	if err := chromedp.Listen(ctx, b.record); err != nil {
		t.Fatalf("start chromium %s: %v", exe, err)
	}
	b.ctx = ctx
	t.Cleanup(b.checkProblems)
	return b
}

// record notes a page's JavaScript errors and failed requests.
func (b *browser) record(ev any) {
	var p string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		p = "JavaScript exception: " + d.Text
		if d.Exception != nil {
			p += " " + d.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var parts []string
			for _, a := range ev.Args {
				parts = append(parts, string(a.Value)+a.Description)
			}
			p = "console error: " + strings.Join(parts, " ")
		}
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError && !b.isAllowedEntry(ev.Entry) {
			p = "browser log error (" + string(ev.Entry.Source) + "): " + ev.Entry.Text + " " + ev.Entry.URL
		}
	case *network.EventLoadingFailed:
		// A stream or fetch cut off by leaving the page is not a failure.
		if !ev.Canceled && ev.ErrorText != "net::ERR_ABORTED" {
			p = "request failed: " + ev.ErrorText + " (" + string(ev.Type) + ")"
		}
	case *network.EventResponseReceived:
		if ev.Response.Status >= 400 {
			b.mu.Lock()
			ok := b.allowed[int(ev.Response.Status)]
			b.mu.Unlock()
			if !ok {
				p = fmt.Sprintf("request answered %d: %s", ev.Response.Status, ev.Response.URL)
			}
		}
	}
	if p != "" {
		b.mu.Lock()
		b.problems = append(b.problems, p)
		b.mu.Unlock()
	}
}

// isAllowedEntry reports whether a browser log error is one a test
// provoked (a refused request it asked for).
func (b *browser) isAllowedEntry(e *log.Entry) bool {
	if e.Source != log.EntrySourceNetwork {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for status := range b.allowed {
		if strings.Contains(e.Text, fmt.Sprintf("status of %d", status)) {
			return true
		}
	}
	return false
}

// allow lets responses with status through the problem check.
func (b *browser) allow(status int) {
	b.mu.Lock()
	b.allowed[status] = true
	b.mu.Unlock()
}

// checkProblems fails the test for every problem recorded.
func (b *browser) checkProblems() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		b.t.Errorf("page problem: %s", p)
	}
}

// do runs browser actions with a deadline.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// waitFor waits until the JavaScript expression is true in the page,
// across navigations (an evaluation during one fails and is tried again).
func (b *browser) waitFor(what, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	b.t.Fatalf("waiting for %s (%s): not true after 20s (last error: %v); the page:\n%.2000s", what, expr, last, page)
}

// eval evaluates an expression, awaiting a promise.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// open navigates to a dashboard path and waits until its data is shown.
func (b *browser) open(path string) {
	b.t.Helper()
	b.do("open "+path, chromedp.Navigate(b.base+path))
	b.waitFor("page "+path+" loaded", `document.getElementById("updated") && document.getElementById("updated").textContent.startsWith("updated")`)
}

// login logs in through the login page with the token.
func (b *browser) login() {
	b.t.Helper()
	b.do("open the login page", chromedp.Navigate(b.base+"/"))
	b.waitFor("the login page", `document.getElementById("token") !== null`)
	b.do("log in",
		chromedp.SendKeys(chromedp.ID("token"), b.token),
		chromedp.Click(chromedp.ID("login-submit")))
	b.waitFor("the overview after login", `document.getElementById("counts") !== null`)
}

// shot writes a screenshot of the page when screenshotsEnv names a folder.
func (b *browser) shot(name string) {
	b.t.Helper()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// api calls the REST API with the bearer token and decodes the answer.
func (b *browser) api(method, path string, body any, out any) int {
	b.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			b.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(b.t.Context(), method, b.apiBase+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		b.t.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			b.t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	return resp.StatusCode
}

// enqueue enqueues a job through the API and returns its id.
func (b *browser) enqueue(job map[string]any) string {
	b.t.Helper()
	var out struct{ ID string }
	b.api("POST", "/api/v1/jobs", job, &out)
	return out.ID
}

// state reads a job's state through the API.
func (b *browser) state(id string) string {
	b.t.Helper()
	var j struct{ State string }
	b.api("GET", "/api/v1/jobs/"+id, nil, &j)
	return j.State
}

// failJob claims the job of a queue and fails its only attempt, as a
// worker would, so it ends failed.
func (b *browser) failJob(queue string, n int) {
	b.t.Helper()
	var claimed struct {
		Jobs []struct {
			ID         string `json:"id"`
			LeaseToken int64  `json:"lease_token"`
		}
	}
	b.api("POST", "/api/v1/claim", map[string]any{"queues": []string{queue}, "max": n, "lease": "30s", "worker": "test"}, &claimed)
	if len(claimed.Jobs) != n {
		b.t.Fatalf("claimed %d jobs of %s; want %d", len(claimed.Jobs), queue, n)
	}
	for _, j := range claimed.Jobs {
		b.api("POST", "/api/v1/jobs/"+j.ID+"/fail", map[string]any{"lease_token": j.LeaseToken, "message": "boom", "stack": "main.handler()\n\tjob.go:12"}, nil)
	}
}

// startWorker runs a kyu.Worker that reaches the server over HTTP, as a
// worker in another process would.
func (b *browser) startWorker(queue string, mux *kyu.Mux) {
	b.t.Helper()
	rb, err := remote.Open(b.base, remote.Options{Token: b.token})
	if err != nil {
		b.t.Fatal(err)
	}
	w, err := kyu.NewWorker(rb, kyu.WorkerConfig{
		Handler: mux, Queues: map[string]int{queue: 2}, ID: "browser-test-worker",
		Lease: 3 * time.Second, HeartbeatInterval: 200 * time.Millisecond, PollInterval: 100 * time.Millisecond,
		DisableMaintenance: true, ShutdownGrace: time.Second,
	})
	if err != nil {
		b.t.Fatal(err)
	}
	if err := w.Start(b.t.Context()); err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w.Shutdown(ctx)
		rb.Close()
	})
}

// TestBrowserLoginAndPages logs in with the token and opens every page,
// at a desktop width and at a phone's, with no JavaScript error, no
// failed request, and no page wider than the phone's screen.
func TestBrowserLoginAndPages(t *testing.T) {
	b := newBrowser(t, nil)
	id := b.enqueue(map[string]any{"type": "email.send", "queue": "emails", "title": "Welcome mail", "payload": map[string]any{"to": "ada@example.com"}, "tags": []string{"vip"}})
	b.enqueue(map[string]any{"type": "report.build", "queue": "reports", "max_attempts": 1})
	b.failJob("reports", 1)
	b.login()
	pages := []struct{ name, path, ready string }{
		{"overview", "/", `document.querySelector("#queues tr[data-queue=emails]") !== null`},
		{"jobs", "/jobs", `document.querySelector("#jobs tr[data-id]") !== null`},
		{"job", "/jobs/" + id, `document.getElementById("payload") !== null`},
		{"queues", "/queues", `document.querySelector("#queues button.pause") !== null`},
		{"workers", "/workers", `document.getElementById("no-workers") !== null`},
		{"periodic", "/periodic", `document.getElementById("no-periodic") !== null`},
		{"enqueue", "/enqueue", `document.getElementById("enqueue") !== null`},
	}
	for _, p := range pages {
		b.open(p.path)
		b.waitFor(p.name+" content", p.ready)
		b.shot(p.name)
	}
	if os.Getenv(screenshotsEnv) != "" {
		b.do("dark scheme", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
			return err
		}))
		b.open("/")
		b.waitFor("overview content", pages[0].ready)
		b.shot("overview-dark")
		b.do("light scheme", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{}})
			return err
		}))
	}
	b.do("phone width", chromedp.EmulateViewport(390, 844))
	for _, p := range pages {
		b.open(p.path)
		b.waitFor(p.name+" content", p.ready)
		if !eval[bool](b, `document.documentElement.scrollWidth <= window.innerWidth + 1`) {
			t.Errorf("page %s is wider than a phone's screen: %d px", p.name, eval[int](b, `document.documentElement.scrollWidth`))
		}
		b.shot(p.name + "-phone")
	}
}

// TestBrowserJobAppearsLive checks that a job enqueued through the API
// shows on the open jobs page without a reload.
func TestBrowserJobAppearsLive(t *testing.T) {
	b := newBrowser(t, nil)
	b.login()
	b.open("/jobs")
	b.waitFor("the empty list", `document.getElementById("empty") !== null`)
	eval[bool](b, `window.kyuNoReload = true`)
	// Half-typed filter text survives the live update, focus included.
	b.do("type in a filter", chromedp.SendKeys(chromedp.ID("f-type"), "live.ch"))
	id := b.enqueue(map[string]any{"type": "live.check", "queue": "live"})
	b.waitFor("the new job in the list", `document.querySelector('#jobs tr[data-id="`+id+`"]') !== null`)
	if !eval[bool](b, `window.kyuNoReload === true`) {
		t.Fatal("the page reloaded to show the job; want it shown live")
	}
	if v := eval[string](b, `document.getElementById("f-type").value + (document.activeElement.id === "f-type" ? " (focused)" : "")`); v != "live.ch (focused)" {
		t.Errorf("the filter being typed reads %q after the update; want %q", v, "live.ch (focused)")
	}
	b.waitFor("the pending count", `document.querySelector('.tabs a[data-state="pending"]').textContent === "pending (1)"`)
}

// TestBrowserRetryFailedJob fails a job's only attempt in a real worker,
// retries it from its page and watches it complete there.
func TestBrowserRetryFailedJob(t *testing.T) {
	b := newBrowser(t, nil)
	var runs atomic.Int32
	mux := kyu.NewMux()
	mux.HandleFunc("flaky", func(ctx context.Context, j *kyu.Job) error {
		if runs.Add(1) == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	})
	b.startWorker("flaky", mux)
	id := b.enqueue(map[string]any{"type": "flaky", "queue": "flaky", "max_attempts": 1})
	b.login()
	b.open("/jobs/" + id)
	b.waitFor("the job failed", `document.querySelector('#job-state [data-state="failed"]') !== null && document.getElementById("retry") !== null`)
	b.waitFor("the error shown", `document.getElementById("errors").textContent.includes("first attempt fails")`)
	b.do("retry", chromedp.Click(chromedp.ID("retry")))
	b.waitFor("the job completed", `document.querySelector('#job-state [data-state="completed"]') !== null`)
	b.shot("job-retried")
	if s := b.state(id); s != "completed" {
		t.Fatalf("job is %s in the store; want completed", s)
	}
	b.open("/workers")
	b.waitFor("the worker listed", `document.getElementById("browser-test-worker") !== null`)
	b.shot("workers-one")
}

// TestBrowserCancelRunningJob cancels a job that a real worker runs and
// watches it end cancelled.
func TestBrowserCancelRunningJob(t *testing.T) {
	b := newBrowser(t, nil)
	mux := kyu.NewMux()
	mux.HandleFunc("slow", func(ctx context.Context, j *kyu.Job) error {
		<-ctx.Done()
		return ctx.Err()
	})
	b.startWorker("slow", mux)
	id := b.enqueue(map[string]any{"type": "slow", "queue": "slow"})
	b.login()
	b.open("/jobs/" + id)
	b.waitFor("the job running", `document.querySelector('#job-state [data-state="active"]') !== null && document.getElementById("cancel") !== null`)
	b.do("cancel", chromedp.Click(chromedp.ID("cancel")))
	b.waitFor("the job cancelled", `document.querySelector('#job-state [data-state="cancelled"]') !== null`)
	if s := b.state(id); s != "cancelled" {
		t.Fatalf("job is %s in the store; want cancelled", s)
	}
}

// TestBrowserPauseResumeQueue pauses and resumes a queue from the queues
// page.
func TestBrowserPauseResumeQueue(t *testing.T) {
	b := newBrowser(t, nil)
	b.enqueue(map[string]any{"type": "t", "queue": "pq"})
	b.login()
	b.open("/queues")
	row := `document.querySelector('#queues tr[data-queue="pq"]')`
	b.waitFor("the queue row", row+` !== null && `+row+`.querySelector("button.pause") !== null`)
	b.do("pause", chromedp.Click(chromedp.CSS(`#queues tr[data-queue="pq"] button.pause`)))
	b.waitFor("the queue paused", row+`.querySelector("td.paused").textContent === "paused"`)
	var q struct {
		Queues []struct {
			Name   string
			Paused bool
		}
	}
	b.api("GET", "/api/v1/queues", nil, &q)
	if len(q.Queues) != 1 || !q.Queues[0].Paused {
		t.Fatalf("queues after pause: %+v; want pq paused", q.Queues)
	}
	b.do("resume", chromedp.Click(chromedp.CSS(`#queues tr[data-queue="pq"] button.resume`)))
	b.waitFor("the queue resumed", row+`.querySelector("td.paused").textContent === "no"`)
	b.api("GET", "/api/v1/queues", nil, &q)
	if q.Queues[0].Paused {
		t.Fatal("queue still paused after resume")
	}
}

// TestBrowserBulkRetry retries every failed job of a filter from the jobs
// page, after a confirmation that shows how many, and leaves the jobs
// outside the filter alone.
func TestBrowserBulkRetry(t *testing.T) {
	b := newBrowser(t, nil)
	var ids []string
	for range 3 {
		ids = append(ids, b.enqueue(map[string]any{"type": "t", "queue": "bq", "max_attempts": 1}))
	}
	other := b.enqueue(map[string]any{"type": "t", "queue": "oq", "max_attempts": 1})
	b.failJob("bq", 3)
	b.failJob("oq", 1)
	b.login()
	b.open("/jobs?state=failed&queue=bq")
	b.waitFor("three failed jobs listed", `document.querySelectorAll("#jobs tr[data-id]").length === 3`)
	b.do("bulk retry", chromedp.Click(chromedp.ID("bulk-go")))
	b.waitFor("the confirmation", `document.getElementById("confirm").open`)
	if text := eval[string](b, `document.getElementById("confirm-text").textContent`); !strings.Contains(text, "Retry 3 jobs") {
		t.Fatalf("confirmation says %q; want it to say Retry 3 jobs", text)
	}
	b.do("confirm", chromedp.Click(chromedp.ID("confirm-yes")))
	b.waitFor("the result", `document.getElementById("flash").textContent.includes("3 of 3 done")`)
	for _, id := range ids {
		if s := b.state(id); s != "pending" {
			t.Errorf("job %s is %s after the bulk retry; want pending", id, s)
		}
	}
	if s := b.state(other); s != "failed" {
		t.Errorf("job outside the filter is %s; want failed", s)
	}
}

// TestBrowserReadOnly checks that a read-only server's pages show no
// action (jobs, job, queues) and that the API refuses a change even from
// a logged-in page.
func TestBrowserReadOnly(t *testing.T) {
	b := newBrowser(t, func(c *server.Config) { c.ReadOnly = true })
	// The jobs to look at come through a writable server over the same
	// store.
	rw, err := server.New(server.Config{Backend: b.store, Token: browserToken, MaintenanceInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(rw.Handler())
	defer ts.Close()
	b.apiBase = ts.URL
	id := b.enqueue(map[string]any{"type": "t", "queue": "roq", "max_attempts": 1})
	b.failJob("roq", 1)
	b.api("PUT", "/api/v1/workers/ro-worker", map[string]any{"worker": map[string]any{"id": "ro-worker", "queues": []string{"roq"}}, "dead_after": "1h", "expire_after": "1h"}, nil)

	b.login()
	actions := `document.querySelector("#bulk-go, .sel-retry, input.pick, #job-actions, #queues button, #workers button, a[href$='/enqueue']")`
	for _, p := range []struct{ path, ready string }{
		{"/jobs", `document.querySelector("#jobs tr[data-id]") !== null`},
		{"/jobs/" + id, `document.getElementById("errors") !== null`},
		{"/queues", `document.querySelector('#queues tr[data-queue="roq"]') !== null`},
		{"/workers", `document.querySelector('#workers tr[data-state="running"]') !== null`},
	} {
		b.open(p.path)
		b.waitFor(p.path+" content", p.ready)
		if !eval[bool](b, `document.getElementById("read-only") !== null`) {
			t.Errorf("%s shows no read-only badge", p.path)
		}
		if !eval[bool](b, actions+` === null`) {
			t.Errorf("read-only page %s shows an action: %s", p.path, eval[string](b, actions+`.outerHTML`))
		}
		b.shot("read-only" + strings.ReplaceAll(p.path, "/", "-"))
	}
	b.allow(http.StatusForbidden)
	status := eval[int](b, `fetch(document.body.dataset.base + "/api/v1/jobs/`+id+`/retry", {method: "POST", headers: {"Content-Type": "application/json"}}).then(r => r.status)`)
	if status != http.StatusForbidden {
		t.Fatalf("retry from the read-only dashboard's session = %d; want 403", status)
	}
	if s := b.state(id); s != "failed" {
		t.Fatalf("job is %s after the refused retry; want failed", s)
	}
}

// TestBrowserBasePath runs the dashboard under --base-path, as behind a
// proxy: login, pages, the event stream and the API all under the prefix.
func TestBrowserBasePath(t *testing.T) {
	b := newBrowser(t, func(c *server.Config) { c.BasePath = "/ops/kyu" })
	b.login()
	if u := eval[string](b, `location.pathname`); u != "/ops/kyu/" {
		t.Fatalf("after login the page is %s; want /ops/kyu/", u)
	}
	b.open("/jobs")
	b.waitFor("the empty list", `document.getElementById("empty") !== null`)
	id := b.enqueue(map[string]any{"type": "t", "queue": "prefixed"})
	b.waitFor("the new job, live", `document.querySelector('#jobs tr[data-id="`+id+`"]') !== null`)
	b.do("open the job", chromedp.Click(chromedp.CSS(`#jobs tr[data-id="`+id+`"] a`)))
	b.waitFor("the job page", `location.pathname === "/ops/kyu/jobs/`+id+`" && document.getElementById("job-state") !== null`)
}

// TestBrowserEnqueueForm enqueues a job from the form: a payload that is
// not JSON disables the button and says why; a valid one enqueues and
// opens the new job.
func TestBrowserEnqueueForm(t *testing.T) {
	b := newBrowser(t, nil)
	b.login()
	b.open("/enqueue")
	b.waitFor("the form", `document.getElementById("enqueue") !== null`)
	setPayload := func(v string) {
		eval[bool](b, `(() => { const t = document.getElementById("e-payload"); t.value = `+jsString(v)+`; t.dispatchEvent(new Event("input")); return true; })()`)
	}
	b.do("fill the form",
		chromedp.SendKeys(chromedp.ID("e-type"), "form.job"),
		chromedp.SendKeys(chromedp.ID("e-queue"), "forms"),
		chromedp.SendKeys(chromedp.ID("e-delay"), "1h"))
	setPayload(`{"to": `)
	b.waitFor("the payload refused", `document.getElementById("enqueue-submit").disabled && document.getElementById("payload-error").textContent.startsWith("Payload is not JSON")`)
	setPayload(`{"to": "ada@example.com"}`)
	b.waitFor("the payload taken", `!document.getElementById("enqueue-submit").disabled && document.getElementById("payload-error").textContent === ""`)
	b.do("enqueue", chromedp.Click(chromedp.ID("enqueue-submit")))
	b.waitFor("the new job's page", `location.pathname.startsWith("/jobs/") && document.getElementById("payload") !== null`)
	id := strings.TrimPrefix(eval[string](b, `location.pathname`), "/jobs/")
	var j struct {
		Type, Queue, State string
		Payload            map[string]string
	}
	b.api("GET", "/api/v1/jobs/"+id, nil, &j)
	if j.Type != "form.job" || j.Queue != "forms" || j.State != "scheduled" || j.Payload["to"] != "ada@example.com" {
		t.Fatalf("enqueued %+v; want form.job in forms, scheduled an hour ahead, with the payload", j)
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestBrowserSelectedJobsAndDelete retries the jobs ticked in the list
// (and only those), then deletes one from its page after confirming.
func TestBrowserSelectedJobsAndDelete(t *testing.T) {
	b := newBrowser(t, nil)
	var ids []string
	for range 3 {
		ids = append(ids, b.enqueue(map[string]any{"type": "t", "queue": "sel", "max_attempts": 1}))
	}
	b.failJob("sel", 3)
	b.login()
	b.open("/jobs?state=failed")
	b.waitFor("three failed jobs", `document.querySelectorAll("#jobs tr[data-id]").length === 3`)
	for _, id := range ids[:2] {
		b.do("tick "+id, chromedp.Click(chromedp.CSS(`#jobs tr[data-id="`+id+`"] input.pick`)))
	}
	b.do("retry the ticked", chromedp.Click(chromedp.CSS(`button.sel-retry`)))
	b.waitFor("the result", `document.getElementById("flash").textContent === "Retry: 2 done"`)
	b.waitFor("one failed job left in the list", `document.querySelectorAll("#jobs tr[data-id]").length === 1`)
	for i, want := range []string{"pending", "pending", "failed"} {
		if s := b.state(ids[i]); s != want {
			t.Errorf("job %d is %s; want %s", i, s, want)
		}
	}
	b.open("/jobs/" + ids[2])
	b.waitFor("the delete button", `document.getElementById("delete") !== null`)
	b.do("delete", chromedp.Click(chromedp.ID("delete")))
	b.waitFor("the confirmation", `document.getElementById("confirm").open`)
	b.do("confirm", chromedp.Click(chromedp.ID("confirm-yes")))
	b.waitFor("back on the jobs page", `location.pathname === "/jobs"`)
	var list struct{ Jobs []struct{ ID string } }
	b.api("GET", "/api/v1/jobs?queue=sel", nil, &list)
	if len(list.Jobs) != 2 {
		t.Fatalf("%d jobs left in the queue; want 2 after deleting one", len(list.Jobs))
	}
}

// TestBrowserPausesWhileHidden checks that the page closes its event
// stream when the tab is hidden and, shown again, reconnects and catches
// up without a reload. (The test flips document.hidden itself; headless
// Chromium does not hide tabs.)
func TestBrowserPausesWhileHidden(t *testing.T) {
	b := newBrowser(t, nil)
	b.login()
	b.open("/jobs")
	b.waitFor("the stream open", `document.getElementById("live").classList.contains("on")`)
	setHidden := func(hidden bool) {
		eval[bool](b, `(() => { Object.defineProperty(document, "hidden", {configurable: true, get: () => `+strconv.FormatBool(hidden)+`}); document.dispatchEvent(new Event("visibilitychange")); return true; })()`)
	}
	setHidden(true)
	if eval[bool](b, `document.getElementById("live").classList.contains("on")`) {
		t.Fatal("the stream is still open while the tab is hidden")
	}
	eval[bool](b, `window.kyuNoReload = true`)
	id := b.enqueue(map[string]any{"type": "t", "queue": "hidden"})
	setHidden(false)
	b.waitFor("the stream open again", `document.getElementById("live").classList.contains("on")`)
	b.waitFor("the job enqueued meanwhile", `document.querySelector('#jobs tr[data-id="`+id+`"]') !== null`)
	if !eval[bool](b, `window.kyuNoReload === true`) {
		t.Fatal("the page reloaded; want it to catch up in place")
	}
}

// TestBrowserJobProgressRunNowAndCopy checks the job page's live
// progress bar and log lines while a real worker runs the job, the run
// now button of a scheduled job, and enqueueing a copy.
func TestBrowserJobProgressRunNowAndCopy(t *testing.T) {
	b := newBrowser(t, nil)
	release := make(chan struct{})
	mux := kyu.NewMux()
	mux.HandleFunc("long", func(ctx context.Context, j *kyu.Job) error {
		if err := kyu.Progress(ctx, 50, "half way"); err != nil {
			return err
		}
		if err := kyu.Log(ctx, "resized the first image"); err != nil {
			return err
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	b.startWorker("long", mux)
	id := b.enqueue(map[string]any{"type": "long", "queue": "long"})
	b.login()
	b.open("/jobs/" + id)
	b.waitFor("the progress bar at 50%", `(() => { const p = document.querySelector("#progress progress"); return p !== null && p.value === 50 && document.getElementById("progress").textContent.includes("half way"); })()`)
	b.waitFor("the log line", `document.getElementById("logs") !== null && document.getElementById("logs").textContent.includes("resized the first image")`)
	b.shot("job-running")
	close(release)
	b.waitFor("the job completed", `document.querySelector('#job-state [data-state="completed"]') !== null`)

	later := b.enqueue(map[string]any{"type": "later", "queue": "later", "delay": "1h", "payload": map[string]any{"n": 7}})
	b.open("/jobs/" + later)
	b.waitFor("the run now button", `document.querySelector('#job-state [data-state="scheduled"]') !== null && document.getElementById("run") !== null`)
	b.do("run now", chromedp.Click(chromedp.ID("run")))
	b.waitFor("the job pending", `document.querySelector('#job-state [data-state="pending"]') !== null`)
	if s := b.state(later); s != "pending" {
		t.Fatalf("job is %s after run now; want pending", s)
	}
	b.do("enqueue a copy", chromedp.Click(chromedp.ID("copy")))
	b.waitFor("the copy's page", `location.pathname !== "/jobs/`+later+`" && document.getElementById("payload") !== null`)
	copyID := strings.TrimPrefix(eval[string](b, `location.pathname`), "/jobs/")
	var j struct {
		Type, Queue string
		Payload     map[string]int
	}
	b.api("GET", "/api/v1/jobs/"+copyID, nil, &j)
	if j.Type != "later" || j.Queue != "later" || j.Payload["n"] != 7 {
		t.Fatalf("copy is %+v; want type later in queue later with the payload", j)
	}
}

// TestBrowserSessionExpires checks that once the session cookie expires,
// the next change the page hears of sends it to the login page, which
// comes back to the same page after logging in again.
func TestBrowserSessionExpires(t *testing.T) {
	b := newBrowser(t, func(c *server.Config) { c.SessionTTL = 2 * time.Second })
	b.login()
	b.open("/jobs?queue=exp")
	b.allow(http.StatusUnauthorized)
	deadline := time.Now().Add(20 * time.Second)
	for !eval[bool](b, `location.pathname === "/login"`) {
		if time.Now().After(deadline) {
			t.Fatal("the page did not go to the login page within 20s of its session's end")
		}
		b.enqueue(map[string]any{"type": "t", "queue": "exp"})
		time.Sleep(200 * time.Millisecond) // a change every 200 ms until then
	}
	b.waitFor("the login form", `document.getElementById("token") !== null`)
	b.do("log in again",
		chromedp.SendKeys(chromedp.ID("token"), b.token),
		chromedp.Click(chromedp.ID("login-submit")))
	b.waitFor("back on the jobs page", `location.pathname === "/jobs" && location.search === "?queue=exp" && document.querySelector("#jobs tr[data-id]") !== null`)
}
