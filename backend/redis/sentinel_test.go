package redis

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/backendtest"
)

// TestSentinel starts a private primary and a Sentinel watching it, and
// runs the conformance suite through a redis-sentinel:// URL.
func TestSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server and a Sentinel")
	}
	primary := startServer(t, "--appendonly", "no")
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	// Sentinel rewrites its configuration file, so it must be writable.
	if err := os.WriteFile(conf, []byte("sentinel monitor kyutest 127.0.0.1 "+strconv.Itoa(primary.port)+" 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sentinel := startServer(t, conf, "--sentinel")
	waitFor(t, 20*time.Second, "the Sentinel to know the primary", func() bool {
		out, err := sentinel.cli("SENTINEL", "get-master-addr-by-name", "kyutest")
		return err == nil && strings.Contains(out, strconv.Itoa(primary.port))
	})
	url := "redis-sentinel://" + sentinel.addr() + "?master=kyutest"
	backendtest.Run(t, func(t *testing.T) backend.Backend {
		return openTest(t, url)
	})
}
