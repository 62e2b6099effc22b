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
	sentinel := startSentinel(t, "kyutest", primary)
	waitFor(t, 20*time.Second, "the Sentinel to know the primary", func() bool {
		out, err := sentinel.cli("SENTINEL", "get-master-addr-by-name", "kyutest")
		return err == nil && strings.Contains(out, strconv.Itoa(primary.port))
	})
	url := "redis-sentinel://" + sentinel.addr() + "?master=kyutest"
	backendtest.Run(t, func(t *testing.T) backend.Backend {
		return openTest(t, url)
	})
}

// TestSentinelFailover enqueues single jobs (whose runs go on connections
// of their own, runconn.go) through a Sentinel while it fails the primary
// over to its replica: every enqueue that succeeded is on the new primary,
// and enqueues succeed again once the failover is over.
func TestSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two redis-servers and a Sentinel")
	}
	primary := startServer(t, "--appendonly", "no")
	replica := startServer(t, "--appendonly", "no", "--replicaof", "127.0.0.1", strconv.Itoa(primary.port))
	sentinel := startSentinel(t, "kyufail", primary)
	waitFor(t, 30*time.Second, "the Sentinel to know the replica", func() bool {
		out, err := sentinel.cli("SENTINEL", "replicas", "kyufail")
		return err == nil && strings.Contains(out, strconv.Itoa(replica.port))
	})
	s, err := OpenURL(t.Context(), "redis-sentinel://"+sentinel.addr()+"?master=kyufail&prefix=kyufail", Options{RetryFor: 30 * time.Second})
	if err != nil {
		t.Fatalf("OpenURL: %v", err)
	}
	defer s.Close()
	enqueue := func() (string, error) {
		res, err := s.Enqueue(t.Context(), backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{{Type: "f", Queue: "failover"}}})
		if err != nil {
			return "", err
		}
		return res.Jobs[0].ID, nil
	}
	var ids []string
	for range 3 * lineCalls {
		id, err := enqueue()
		if err != nil {
			t.Fatalf("Enqueue before the failover: %v", err)
		}
		ids = append(ids, id)
	}
	defer func() {
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(sentinel.dir, "redis.log"))
			t.Logf("sentinel log:\n%s", log)
		}
	}()
	// The Sentinel refuses (NOGOODSLAVE) until it has heard from the
	// replica that its link to the primary is up.
	waitFor(t, 30*time.Second, "the Sentinel to start a failover", func() bool {
		out, err := sentinel.cli("SENTINEL", "FAILOVER", "kyufail")
		return err == nil && strings.TrimSpace(out) == "OK"
	})
	waitFor(t, 30*time.Second, "the replica to be the primary", func() bool {
		out, err := sentinel.cli("SENTINEL", "get-master-addr-by-name", "kyufail")
		return err == nil && strings.Contains(out, strconv.Itoa(replica.port))
	})
	// The Sentinel makes the old primary a replica of the new one and
	// cuts its clients' connections: runs on connections of their own to
	// it fail, and their connections are replaced.
	for range 3 * lineCalls {
		id, err := enqueue()
		if err != nil {
			t.Fatalf("Enqueue after the failover: %v", err)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		if _, err := s.Get(t.Context(), backend.GetParams{ID: id}); err != nil {
			t.Fatalf("Get(%s) after the failover: %v", id, err)
		}
	}
	if out, _ := replica.cli("ROLE"); !strings.HasPrefix(strings.TrimSpace(out), "master") {
		t.Fatalf("the replica's role after the failover: %q; want master", out)
	}
}

// startSentinel starts a Sentinel that watches primary as master, with a
// quorum of one.
func startSentinel(t *testing.T, master string, primary *privateServer) *privateServer {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	// Sentinel rewrites its configuration file, so it must be writable.
	if err := os.WriteFile(conf, []byte("sentinel monitor "+master+" 127.0.0.1 "+strconv.Itoa(primary.port)+" 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return startServer(t, conf, "--sentinel")
}
