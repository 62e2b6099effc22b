package redis

import (
	"fmt"
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
// enqueues succeed again once the failover is over, and the store lends no
// connection to the old primary, which the Sentinel leaves taking writes
// for some seconds before it makes it a replica.
//
// Replication is asynchronous and a forced failover does not wait for it,
// so the test waits for the replica to have every write before it fails
// over; and a client hears of the new primary a moment after the Sentinel
// names it, so the test waits for the store to send there before it
// enqueues again. Without these waits jobs go missing by design.
func TestSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two redis-servers and a Sentinel")
	}
	// No pause before the replica's first sync (5 s by default).
	primary := startServer(t, "--appendonly", "no", "--repl-diskless-sync-delay", "0")
	replica := startServer(t, "--appendonly", "no", "--replicaof", "127.0.0.1", strconv.Itoa(primary.port))
	sentinel := startSentinel(t, "kyufail", primary)
	defer func() {
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(sentinel.dir, "redis.log"))
			t.Logf("sentinel log:\n%s", log)
		}
	}()
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
	// Every connection of its own the store may lend, made now, to the
	// old primary.
	lendAll := func() []*runConn {
		var lent []*runConn
		for range lineCalls {
			if rc := s.runConns.take(s.client); rc != nil {
				lent = append(lent, rc)
			}
		}
		return lent
	}
	for _, rc := range lendAll() {
		s.runConns.give(rc, false)
	}
	var ids []string
	for i := range 3 * lineCalls {
		id, err := enqueue()
		if err != nil {
			t.Fatalf("Enqueue %d before the failover: %v", i, err)
		}
		ids = append(ids, id)
	}

	written := replOffset(t, primary, "master_repl_offset")
	waitFor(t, 30*time.Second, fmt.Sprintf("the replica to have every write before the failover (primary's offset %d)", written), func() bool {
		info, err := replica.cli("INFO", "replication")
		return err == nil && strings.Contains(info, "master_link_status:up") && infoInt(info, "slave_repl_offset") >= written
	})
	// The Sentinel refuses (NOGOODSLAVE) until it has heard from the
	// replica that its link to the primary is up.
	waitFor(t, 30*time.Second, "the Sentinel to start a failover", func() bool {
		out, err := sentinel.cli("SENTINEL", "FAILOVER", "kyufail")
		return err == nil && strings.TrimSpace(out) == "OK"
	})
	waitFor(t, 30*time.Second, "the Sentinel to name the replica as the primary", func() bool {
		out, err := sentinel.cli("SENTINEL", "get-master-addr-by-name", "kyufail")
		return err == nil && strings.Contains(out, strconv.Itoa(replica.port))
	})
	waitFor(t, 30*time.Second, "the store's client to send to the new primary", func() bool {
		return primaryAddr(s.client) == replica.addr()
	})
	for i := range 3 * lineCalls {
		id, err := enqueue()
		if err != nil {
			t.Fatalf("Enqueue %d after the failover: %v", i, err)
		}
		ids = append(ids, id)
	}
	for i, id := range ids {
		if _, err := s.Get(t.Context(), backend.GetParams{ID: id}); err != nil {
			when := "before"
			if i >= 3*lineCalls {
				when = "after"
			}
			t.Fatalf("Get of job %d of %d, enqueued %s the failover, on the new primary: %v", i, len(ids), when, err)
		}
	}
	if out, _ := replica.cli("ROLE"); !strings.HasPrefix(strings.TrimSpace(out), "master") {
		t.Fatalf("the replica's role after the failover: %q; want master", out)
	}
	lent := lendAll()
	for i, rc := range lent {
		info, err := rc.c.Do(t.Context(), rc.c.B().Info().Section("server").Build()).ToString()
		if err != nil {
			t.Fatalf("INFO on lent connection %d after the failover: %v", i, err)
		}
		if port := infoInt(info, "tcp_port"); port != int64(replica.port) {
			t.Errorf("lent connection %d after the failover is to port %d; want the new primary's %d", i, port, replica.port)
		}
	}
	for _, rc := range lent {
		s.runConns.give(rc, false)
	}
}

// replOffset reads a replication offset (field of INFO replication) of ps.
func replOffset(t *testing.T, ps *privateServer, field string) int64 {
	t.Helper()
	info, err := ps.cli("INFO", "replication")
	if err != nil {
		t.Fatalf("INFO replication on port %d: %v", ps.port, err)
	}
	n := infoInt(info, field)
	if n < 0 {
		t.Fatalf("no %s in INFO replication of port %d:\n%s", field, ps.port, info)
	}
	return n
}

// infoInt returns the integer field of an INFO answer, -1 when absent.
func infoInt(info, field string) int64 {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
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
