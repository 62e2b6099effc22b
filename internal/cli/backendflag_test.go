package cli

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kyuhq/kyu/backend/backendurl"
)

// TestResolveBackend checks the rule: --backend, else KYU_BACKEND, else
// the default kyu server.
func TestResolveBackend(t *testing.T) {
	t.Parallel()
	env := func(v string) func(string) string {
		return func(name string) string {
			if name == backendEnv {
				return v
			}
			return ""
		}
	}
	tests := []struct{ flag, env, want string }{
		{"redis://r:6379/0", "http://e:7420", "redis://r:6379/0"},
		{"", "http://e:7420", "http://e:7420"},
		{"", "", "http://127.0.0.1:7420"},
	}
	for _, tt := range tests {
		if got := resolveBackend(tt.flag, env(tt.env)); got != tt.want {
			t.Errorf("resolveBackend(%q) with KYU_BACKEND=%q = %q; want %q", tt.flag, tt.env, got, tt.want)
		}
	}
}

// TestBackendFromEnv runs commands with no --backend, taking the store
// from KYU_BACKEND. (No t.Parallel: it sets KYU_BACKEND.)
func TestBackendFromEnv(t *testing.T) {
	store := "pebble://" + filepath.Join(t.TempDir(), "store")
	t.Setenv(backendEnv, store)
	out, _, err := run(t, "enqueue", "from.env")
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := run(t, "jobs", "get", strings.TrimSpace(out), "--backend", store); err != nil || !strings.Contains(got, "from.env") {
		t.Fatalf("the job enqueued with KYU_BACKEND is not in %s: %v", store, err)
	}
}

// TestLockedStoreNamesTheServer runs a command against an embedded store
// that another holder (a server) has open: the error says to use the
// server's URL.
func TestLockedStoreNamesTheServer(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	b, err := backendurl.Open(context.Background(), "pebble://"+dir, backendurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, _, err = run(t, "jobs", "list", "--backend", "pebble://"+dir)
	if err == nil || !strings.Contains(err.Error(), "use its URL instead") || !strings.Contains(err.Error(), "--backend http://127.0.0.1:7420") {
		t.Fatalf("jobs list on a locked store = %v; want the lock error saying to use the server's URL", err)
	}
	if ExitCode(err) != ExitFailure {
		t.Fatalf("exit code %d; want %d", ExitCode(err), ExitFailure)
	}
}

// TestOperatorHelp checks that every operator command's help has an
// example.
func TestOperatorHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"enqueue"}, {"jobs"}, {"jobs", "list"}, {"jobs", "get"}, {"jobs", "wait"}, {"jobs", "logs"},
		{"jobs", "retry"}, {"jobs", "cancel"}, {"jobs", "run"}, {"jobs", "delete"},
		{"queues"}, {"queues", "pause"}, {"queues", "resume"}, {"queues", "purge"}, {"queues", "retry"},
		{"stats"}, {"workers"},
	} {
		out, _, err := run(t, append(args, "--help")...)
		if err != nil || !strings.Contains(out, "Examples:\n  kyu "+args[0]) {
			t.Errorf("kyu %q --help has no example (%v):\n%s", args, err, out)
		}
	}
}

// TestNoServerSaysSo runs a command against a URL where no server
// listens: the error says to start one or to name the store.
func TestNoServerSaysSo(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	_, _, err = run(t, "queues", "--backend", url)
	if err == nil || !strings.Contains(err.Error(), "no kyu server answers at "+url) || ExitCode(err) != ExitFailure {
		t.Fatalf("queues with no server = %v; want exit 1 saying no server answers", err)
	}
}
