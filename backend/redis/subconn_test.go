package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestMultiBesideSubscriptions sends MULTI blocks that publish on the
// channels of a store's own Pub/Sub subscriptions (a waiting claim's,
// a Subscribe's, a WatchFinished's) while they are held. Before Redis
// 7.2 a message published inside MULTI to a channel the same RESP3
// connection is subscribed to lands inside the EXEC reply, which rueidis
// reports as a protocol bug (a panic in its reader); the store's
// subscriptions hold a connection of their own, so the MULTI blocks of
// the shared client never run where a subscription is.
//
// The shared client spreads MULTI blocks over its pipelined connections
// at random, so each case sends many.
func TestMultiBesideSubscriptions(t *testing.T) {
	const rounds = 32
	// batch enqueues one job in queue and one in another, which is one
	// MULTI publishing on both wake channels (runEnqueue).
	batch := func(t *testing.T, s *Store, queue string) []string {
		t.Helper()
		res, err := s.Enqueue(t.Context(), backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{
			{Type: "t", Queue: queue}, {Type: "t", Queue: "other"},
		}})
		if err != nil {
			t.Fatalf("Enqueue across two queues: %v", err)
		}
		return []string{res.Jobs[0].ID, res.Jobs[1].ID}
	}

	t.Run("ClaimWait", func(t *testing.T) {
		s := openTest(t, "")
		for i := range rounds {
			ctx, cancel := context.WithCancel(t.Context())
			answer := claimAsync(ctx, s, waitClaimParams(1, "q"))
			awaitWaiting(t, s, "q", 1)
			ids := batch(t, s, "q")
			var a waitClaimAnswer
			select {
			case a = <-answer:
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: the waiting claim did not return after the enqueue", i)
			}
			cancel()
			if a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != ids[0] {
				t.Fatalf("round %d: ClaimWait = %+v, %v; want job %s", i, a.res, a.err, ids[0])
			}
		}
	})

	t.Run("Subscribe", func(t *testing.T) {
		s := openTest(t, "")
		sub, err := s.Subscribe(t.Context(), backend.SubscribeParams{})
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		defer sub.Close()
		for i := range rounds {
			batch(t, s, "q")
			select {
			case <-sub.C:
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: no wake-up after the enqueue", i)
			}
		}
	})

	t.Run("WatchFinished", func(t *testing.T) {
		s := openTest(t, "")
		ids := batch(t, s, "q")
		num, ok := queueNumOf(ids[0])
		if !ok {
			t.Fatalf("job id %s names no queue", ids[0])
		}
		sub, err := s.WatchFinished(t.Context(), backend.WatchParams{IDs: ids[:1]})
		if err != nil {
			t.Fatalf("WatchFinished: %v", err)
		}
		defer sub.Close()
		// What a MULTI of scripts that finish jobs would publish.
		done := s.keys.queue(num).tag + ":done"
		for i := range rounds {
			b := s.client.B()
			res := s.client.DoMulti(t.Context(), b.Multi().Build(), b.Publish().Channel(done).Message(ids[0]).Build(), b.Exec().Build())
			for k, r := range res {
				if err := r.Error(); err != nil {
					t.Fatalf("round %d: reply %d of MULTI PUBLISH EXEC: %v", i, k, err)
				}
			}
			select {
			case <-sub.C:
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: no signal after the job's done message", i)
			}
		}
	})
}

// TestSubscriptionAfterLostConnection cuts the Pub/Sub connection of a
// store on a server of the test's own: once subscribed again, the store
// signals the subscription (a wake-up may have been missed meanwhile),
// which then hears the wake-ups of MULTI blocks that publish on its
// channels; and Close leaves no connection of the store open.
func TestSubscriptionAfterLostConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server")
	}
	ps := startServer(t, "--appendonly", "no")
	s, sub := openSubscribed(t, ps, "kyusubconn", nil)
	cutPubSub(t, ps, "the cut")
	// The signal comes once the pattern is subscribed again.
	awaitSignal(t, sub, "after the subscription's connection was cut")
	if n := patternCount(ps); n != 1 {
		t.Fatalf("pattern subscriptions on the server after the signal = %d; want 1", n)
	}
	for i := range 8 {
		if _, err := s.Enqueue(t.Context(), backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{
			{Type: "t", Queue: "q"}, {Type: "t", Queue: "other"},
		}}); err != nil {
			t.Fatalf("Enqueue %d across two queues: %v", i, err)
		}
		awaitSignal(t, sub, fmt.Sprintf("for enqueue %d after subscribing again", i))
	}
	sub.Close()
	s.Close()
	waitFor(t, 10*time.Second, "the closed store's connections to end", func() bool {
		out, err := ps.cli("CLIENT", "LIST")
		return err == nil && strings.Count(strings.TrimSpace(out), "\n") == 0 && patternCount(ps) == 0
	})
}

// TestSubscriptionAcrossFailover holds a subscription through a Sentinel
// while it fails the primary over to its replica: the subscription moves
// to the new primary, is signalled once there (wake-ups may have been
// missed meanwhile), and hears the wake-ups of enqueues made after the
// failover.
func TestSubscriptionAcrossFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two redis-servers and a Sentinel")
	}
	primary := startServer(t, "--appendonly", "no", "--repl-diskless-sync-delay", "0")
	replica := startServer(t, "--appendonly", "no", "--replicaof", "127.0.0.1", strconv.Itoa(primary.port))
	sentinel := startSentinel(t, "kyusubfail", primary)
	waitFor(t, 30*time.Second, "the Sentinel to know the replica", func() bool {
		out, err := sentinel.cli("SENTINEL", "replicas", "kyusubfail")
		return err == nil && strings.Contains(out, strconv.Itoa(replica.port))
	})
	s, err := OpenURL(t.Context(), "redis-sentinel://"+sentinel.addr()+"?master=kyusubfail&prefix=kyusubfail", Options{RetryFor: 30 * time.Second})
	if err != nil {
		t.Fatalf("OpenURL: %v", err)
	}
	defer s.Close()
	sub, err := s.Subscribe(t.Context(), backend.SubscribeParams{Queues: []string{"q"}})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sub.Close()
	if n := patternCount(primary); n != 1 {
		t.Fatalf("pattern subscriptions on the primary = %d; want 1", n)
	}
	waitFor(t, 30*time.Second, "the replica's link to the primary", func() bool {
		info, err := replica.cli("INFO", "replication")
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	waitFor(t, 30*time.Second, "the Sentinel to start a failover", func() bool {
		out, err := sentinel.cli("SENTINEL", "FAILOVER", "kyusubfail")
		return err == nil && strings.TrimSpace(out) == "OK"
	})
	waitFor(t, 30*time.Second, "the subscription to move to the new primary", func() bool {
		return patternCount(replica) == 1
	})
	awaitSignal(t, sub, "once subscribed on the new primary")
	waitFor(t, 30*time.Second, "the store's client to send to the new primary", func() bool {
		return primaryAddr(s.client) == replica.addr()
	})
	for i := range 4 {
		if _, err := s.Enqueue(t.Context(), backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{
			{Type: "t", Queue: "q"}, {Type: "t", Queue: "other"},
		}}); err != nil {
			t.Fatalf("Enqueue %d after the failover: %v", i, err)
		}
		awaitSignal(t, sub, fmt.Sprintf("for enqueue %d after the failover", i))
	}
}

// TestResubscribePauses loses a store's Pub/Sub connection while its
// server is down, so the loop's pauses between tries grow, then, once the
// server is back and the pattern subscribed again, cuts the connection a
// few more times: each of those is a first loss after a confirmed
// subscription, so each pause is the first, short one, not the longest
// reached while the server was down.
func TestResubscribePauses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server")
	}
	ps := startServer(t, "--appendonly", "no")
	var mu sync.Mutex
	var pauses []time.Duration
	taken := func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(pauses)
	}
	_, sub := openSubscribed(t, ps, "kyupause", func(s *Store) {
		s.notify.paused = func(d time.Duration) {
			mu.Lock()
			pauses = append(pauses, d)
			mu.Unlock()
		}
	})

	ps.kill()
	waitFor(t, 10*time.Second, "four failed tries to subscribe again", func() bool { return len(taken()) >= 4 })
	ps.start()
	awaitSignal(t, sub, "once subscribed again after the restart")
	down := taken()
	if p := down[:4]; p[0] >= p[3] {
		t.Fatalf("pauses while the server was down = %v; want them growing", p)
	}
	for i := range 4 {
		cutPubSub(t, ps, fmt.Sprintf("cut %d", i))
		awaitSignal(t, sub, fmt.Sprintf("after cut %d", i))
	}
	after := taken()[len(down):]
	if len(after) != 4 {
		t.Fatalf("pauses after the four cuts = %v; want one each", after)
	}
	for i, p := range after {
		if p != down[0] {
			t.Errorf("pause after cut %d = %v; want the first pause, %v (pauses while down: %v)", i, p, down[0], down)
		}
	}
}

// openSubscribed opens a store with prefix on the private server ps and
// subscribes to queue q's wake-ups; set, when not nil, sees the store
// before it subscribes. Both close when the test ends.
func openSubscribed(t *testing.T, ps *privateServer, prefix string, set func(*Store)) (*Store, *backend.Subscription) {
	t.Helper()
	s, err := Open(t.Context(), Options{Addrs: []string{ps.addr()}, Prefix: prefix, RetryFor: 5 * time.Second})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if set != nil {
		set(s)
	}
	sub, err := s.Subscribe(t.Context(), backend.SubscribeParams{Queues: []string{"q"}})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	t.Cleanup(sub.Close)
	return s, sub
}

// awaitSignal fails unless sub is signalled within 10 s; what says
// which signal.
func awaitSignal(t *testing.T, sub *backend.Subscription, what string) {
	t.Helper()
	select {
	case <-sub.C:
	case <-time.After(10 * time.Second):
		t.Fatalf("no signal %s", what)
	}
}

// patternCount is the number of pattern subscriptions on ps (PUBSUB
// NUMPAT), or -1 when it cannot be read.
func patternCount(ps *privateServer) int {
	out, err := ps.cli("PUBSUB", "NUMPAT")
	if err != nil {
		return -1
	}
	n, _ := strconv.Atoi(strings.TrimSpace(out))
	return n
}

// cutPubSub cuts the Pub/Sub connection on ps (CLIENT KILL TYPE pubsub)
// and fails unless exactly one was cut; what says which cut.
func cutPubSub(t *testing.T, ps *privateServer, what string) {
	t.Helper()
	if out, err := ps.cli("CLIENT", "KILL", "TYPE", "pubsub"); err != nil || strings.TrimSpace(out) != "1" {
		t.Fatalf("%s: CLIENT KILL TYPE pubsub = %q, %v; want one connection cut", what, out, err)
	}
}
