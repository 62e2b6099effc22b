package redis

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/backendtest"
)

// TestCluster starts a private Redis Cluster of three primaries on free
// loopback ports and runs the conformance suite on it: every script must
// keep to one slot.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	needRedisServer(t)
	if _, err := exec.LookPath("redis-cli"); err != nil {
		unreachable(t, "redis-cli (not installed)", err)
	}
	var nodes []*privateServer
	var addrs []string
	for range 3 {
		ps := startServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000", "--appendonly", "no")
		nodes = append(nodes, ps)
		addrs = append(addrs, ps.addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := nodes[0].cli(args...); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	waitFor(t, 30*time.Second, "cluster_state:ok on every node", func() bool {
		for _, n := range nodes {
			out, err := n.cli("CLUSTER", "INFO")
			if err != nil || !strings.Contains(out, "cluster_state:ok") {
				return false
			}
		}
		return true
	})
	url := "redis-cluster://" + strings.Join(addrs, ",")

	// A store on the cluster spreads its queues over the nodes.
	s := openTest(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var jobs []backend.NewJob
	for _, q := range []string{"a", "b", "c", "d", "e", "f"} {
		jobs = append(jobs, backend.NewJob{Type: "t", Queue: q})
	}
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: now})
	if err != nil {
		t.Fatalf("Enqueue into six queues on a cluster: %v", err)
	}
	for _, j := range res.Jobs {
		if _, err := s.Get(ctx, backend.GetParams{ID: j.ID}); err != nil {
			t.Fatalf("Get(%s): %v", j.ID, err)
		}
	}

	// Waiting claims are filled by enqueues in the slot of their queue.
	deafen(t, s)
	enqueueFillsWaitingClaim(t, s, "ha", "hb", "hc", "hd", "he", "hf")

	// A stale entry in a queue's JID index or the store-wide one is
	// taken over.
	t.Run("StaleJID", func(t *testing.T) { testJIDStaleEntry(t, openTest(t, url)) })
	t.Run("UnparsedJID", func(t *testing.T) { testJIDUnparsed(t, openTest(t, url)) })
	t.Run("StaleJIDImport", func(t *testing.T) { testJIDStaleImport(t, openTest(t, url)) })

	backendtest.Run(t, func(t *testing.T) backend.Backend {
		return openTest(t, url)
	})
}
