//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkerNeedsAHandler checks that a worker with no handler is a usage
// error (exit 2), before it opens any store.
func TestWorkerNeedsAHandler(t *testing.T) {
	t.Setenv(configEnv, "")
	_, _, err := kyuCmd(t, "http://127.0.0.1:1", "", "worker", "--queues", "a")
	if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "no handler") {
		t.Errorf("error %v (exit %d); want a usage error naming the missing handler", err, ExitCode(err))
	}
	_, _, err = kyuCmd(t, "http://127.0.0.1:1", "", "worker", "--handle", "noequals")
	if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "TYPE=COMMAND") {
		t.Errorf("error %v; want a usage error showing TYPE=COMMAND", err)
	}
}

// TestWorkerBadConfig checks that a config file with an error is a usage
// error naming the file, the line and the key.
func TestWorkerBadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "worker.toml")
	if err := os.WriteFile(path, []byte("[handlers.t]\nshell = \"true\"\n\n[profiles.p]\nconcurrency = -1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := kyuCmd(t, "http://127.0.0.1:1", "", "worker", "--config", path)
	if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), path+":5: profiles.p.concurrency: -1: want at least 1") {
		t.Errorf("error %v (exit %d); want exit 2 with the file, line 5 and the key", err, ExitCode(err))
	}
}

// TestWorkerPrintConfig checks the merge: the file, then KYU_*
// variables, then flags.
func TestWorkerPrintConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "worker.toml")
	src := `profile = "web"
[handlers.mail]
command = ["./mail.sh"]
dir = "bin"
[profiles.web]
concurrency = 3
queues = ["a", "b"]
max_jobs = 7
[profiles.batch]
queues = ["x"]
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(configEnv, path)
	t.Setenv(concurrencyEnv, "5")
	t.Setenv(backendEnv, "")
	out := mustKyu(t, "http://example:7420", "worker", "--print-config", "--max-jobs", "9", "--handle", "echo=cat", "--handle", "web=http://127.0.0.1:8080/jobs")
	for _, want := range []string{
		`backend = "http://example:7420"`, `profile = "web"`, "concurrency = 5", `queues = ["a", "b"]`,
		"max_jobs = 9", `shutdown_timeout = "30s"`, `kill_grace = "5s"`,
		`[handlers.echo]`, `shell = "cat"`, `[handlers.web]`, `url = "http://127.0.0.1:8080/jobs"`, `[handlers.mail]`, `command = ["./mail.sh"]`, `dir = "` + filepath.Join(dir, "bin") + `"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, `job_log_level = "info"`) {
		t.Errorf("config lacks the default job_log_level:\n%s", out)
	}
	// The job log level: file, then $KYU_JOB_LOG_LEVEL, then the flag.
	if err := os.WriteFile(path, []byte("job_log_level = \"debug\"\n"+src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := mustKyu(t, "http://example:7420", "worker", "--print-config"); !strings.Contains(out, `job_log_level = "debug"`) {
		t.Errorf("job_log_level from the file:\n%s", out)
	}
	t.Setenv(jobLogLevelEnv, "warn")
	if out := mustKyu(t, "http://example:7420", "worker", "--print-config"); !strings.Contains(out, `job_log_level = "warn"`) {
		t.Errorf("job_log_level from $%s:\n%s", jobLogLevelEnv, out)
	}
	if out := mustKyu(t, "http://example:7420", "worker", "--print-config", "--job-log-level", "OFF"); !strings.Contains(out, `job_log_level = "off"`) {
		t.Errorf("--job-log-level OFF:\n%s", out)
	}
	_, _, err := kyuCmd(t, "http://127.0.0.1:1", "", "worker", "--print-config", "--job-log-level", "loud")
	if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), `--job-log-level "loud": want debug, info, warn, error or off`) {
		t.Errorf("--job-log-level loud: error %v (exit %d); want a usage error", err, ExitCode(err))
	}
	t.Setenv(jobLogLevelEnv, "")

	// prefetch: 1 by default, 0 for none.
	if out := mustKyu(t, "http://example:7420", "worker", "--print-config"); !strings.Contains(out, "prefetch = 1\n") {
		t.Errorf("default prefetch:\n%s", out)
	}
	if out := mustKyu(t, "http://example:7420", "worker", "--print-config", "--prefetch", "0"); !strings.Contains(out, "prefetch = 0\n") {
		t.Errorf("--prefetch 0:\n%s", out)
	}
	t.Setenv(prefetchEnv, "8")
	if out := mustKyu(t, "http://example:7420", "worker", "--print-config"); !strings.Contains(out, "prefetch = 8\n") {
		t.Errorf("$%s 8:\n%s", prefetchEnv, out)
	}
	t.Setenv(prefetchEnv, "")
	out = mustKyu(t, "http://example:7420", "worker", "--print-config", "--profile", "batch", "--queues", "p=2,q=1")
	if !strings.Contains(out, `queues = ["p", "q"]`) || !strings.Contains(out, "p = 2") || !strings.Contains(out, "max_jobs = 0") {
		t.Errorf("batch profile with --queues:\n%s", out)
	}
}
