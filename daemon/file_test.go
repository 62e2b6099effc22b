package daemon_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/daemon"
)

const goodFile = `
backend = "http://127.0.0.1:7420"
profile = "web"
shutdown_timeout = "10s"

[handlers."email.send"]
command = ["./send-mail", "--fast"]
timeout = "2m"
env = { SMTP_HOST = "localhost" }
dir = "bin"

[profiles.web]
concurrency = 8
queues = ["critical", "default"]
max = { default = 6 }

[profiles.batch]
queues = ["reports", "exports"]
weights = { reports = 3, exports = 1 }
max_jobs = 1000
kill_grace = "1s"

[profiles.batch.handlers.report]
shell = "python3 report.py"
retry = false
backoff = "fixed"
backoff_base = "5s"
`

// TestFileProfiles checks that a profile merges the top level's values
// and handlers with its own.
func TestFileProfiles(t *testing.T) {
	f, err := daemon.ParseFile("/etc/kyu/worker.toml", []byte(goodFile))
	if err != nil {
		t.Fatal(err)
	}
	web, err := f.Config("")
	if err != nil {
		t.Fatal(err)
	}
	if web.Concurrency != 8 || web.ShutdownTimeout != 10*time.Second || len(web.Queues) != 2 ||
		web.Queues[0] != (kyu.PoolQueue{Name: "critical"}) || web.Queues[1] != (kyu.PoolQueue{Name: "default", Max: 6}) {
		t.Errorf("web profile %+v", web)
	}
	h := web.Handlers["email.send"]
	if h.Dir != "/etc/kyu/bin" || h.Timeout != 2*time.Minute || h.Env["SMTP_HOST"] != "localhost" || len(h.Command) != 2 {
		t.Errorf("email.send handler %+v", h)
	}
	batch, err := f.Config("batch")
	if err != nil {
		t.Fatal(err)
	}
	if batch.MaxJobs != 1000 || batch.KillGrace != time.Second || batch.Queues[0] != (kyu.PoolQueue{Name: "reports", Weight: 3}) ||
		len(batch.Handlers) != 2 || !batch.Handlers["report"].Retry.NoRetry || batch.Handlers["report"].Retry.BackoffBase != 5*time.Second {
		t.Errorf("batch profile %+v", batch)
	}
	if _, err := f.Config("nope"); err == nil || !strings.Contains(err.Error(), "batch, web") {
		t.Errorf("unknown profile: %v; want the names of the file's profiles", err)
	}
}

// TestFileErrors checks that each error names the file, the line and the
// key.
func TestFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"syntax", "concurrency = 3\nqueues = [\"a\"\n", "w.toml:2: queues: expected a comma"},
		{"type", "[profiles.a]\nconcurrency = \"many\"\n", "w.toml:2: profiles.a.concurrency"},
		{"unknown key", "[profiles.a]\nconcurency = 3\n", "w.toml:2: profiles.a.concurency: unknown key"},
		{"duration", "[handlers.t]\nshell = \"x\"\ntimeout = \"soon\"\n", `w.toml:3: handlers.t.timeout: not a duration such as "30s" or "2m": "soon"`},
		{"concurrency", "[profiles.a]\nqueues = [\"q\"]\nconcurrency = 0\n", "w.toml:3: profiles.a.concurrency: 0: want at least 1"},
		{"weight of unlisted queue", "[profiles.a]\nqueues = [\"q\"]\nweights = { r = 2 }\n", "w.toml:3: profiles.a.weights.r: queue \"r\" is not in queues"},
		{"handler without command", "[handlers.t]\ntimeout = \"1s\"\n", "w.toml:1: handlers.t: no command"},
		{"bad backoff", "[handlers.t]\nshell = \"x\"\nbackoff = \"linear\"\n", "w.toml:1: handlers.t: backoff \"linear\""},
		{"missing weight", "[profiles.a]\nqueues = [\"q\", \"r\"]\nweights = { q = 2 }\n", "w.toml:3: profiles.a.weights: queue \"r\" has no weight"},
		{"bad queue name", "[profiles.a]\nqueues = [\"no spaces\"]\n", "w.toml:1: profiles.a:"},
		{"job log level", "log_level = \"info\"\njob_log_level = \"loud\"\n", `w.toml:2: job_log_level: "loud": want debug, info, warn, error or off`},
		{"prefetch", "[profiles.a]\nprefetch = -2\n", "w.toml:2: profiles.a.prefetch: -2: want 0 (none) or more"},
		{"default profile missing", "profile = \"x\"\n", "w.toml:1: profile: no profile \"x\""},
		{"grace over the lease", "[profiles.a]\nlease = \"2s\"\nkill_grace = \"5s\"\n", "w.toml:1: profiles.a: kill_grace 5s: want less than the lease, 2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := daemon.ParseFile("w.toml", []byte(tc.src))
			var fe *daemon.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v; want a *FileError", err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q; want %q", err, tc.want)
			}
		})
	}
}

// TestExampleConfig checks that examples/worker/worker.toml reads, with
// both its profiles.
func TestExampleConfig(t *testing.T) {
	f, err := daemon.ReadFile("../examples/worker/worker.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"", "web", "batch"} {
		c, err := f.Config(p)
		if err != nil {
			t.Fatalf("profile %q: %v", p, err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("profile %q: %v", p, err)
		}
	}
}

// TestFilePrefetch checks prefetch: a profile's own over the top level's,
// and 0 for none.
func TestFilePrefetch(t *testing.T) {
	f, err := daemon.ParseFile("w.toml", []byte("prefetch = 4\n[profiles.none]\nprefetch = 0\n[profiles.same]\nconcurrency = 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	for profile, want := range map[string]int{"none": -1, "same": 4} {
		c, err := f.Config(profile)
		if err != nil || c.Prefetch != want {
			t.Errorf("profile %s: Prefetch %d (%v); want %d", profile, c.Prefetch, err, want)
		}
	}
}
