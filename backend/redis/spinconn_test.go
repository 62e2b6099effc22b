//go:build linux

package redis

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/backendtest"
)

// spinPair dials a spinConn to a local listener; serve gets the server's
// side of the connection.
func spinPair(t *testing.T, serve func(net.Conn)) (*spinConn, *spinDialer) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
	sd := &spinDialer{}
	c, err := sd.dial(t.Context(), l.Addr().String(), &net.Dialer{}, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	sc, ok := c.(*spinConn)
	if !ok {
		t.Fatalf("dial made a %T; want a *spinConn", c)
	}
	return sc, sd
}

// echoAfter answers each line read with the same line, after wait.
func echoAfter(wait time.Duration) func(net.Conn) {
	return func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			if wait > 0 {
				time.Sleep(wait)
			} else {
				for start := time.Now(); time.Since(start) < 10*time.Microsecond; {
				}
			}
			if _, err := c.Write(line); err != nil {
				return
			}
		}
	}
}

// echoRound writes one line and reads its echo.
func echoRound(t *testing.T, c net.Conn, deadline bool) {
	t.Helper()
	var dl time.Time
	if deadline {
		dl = time.Now().Add(10 * time.Second)
	}
	if err := c.SetDeadline(dl); err != nil {
		t.Fatalf("SetDeadline: %v", err)
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	buf := make([]byte, 16)
	got := 0
	for got < 5 {
		n, err := c.Read(buf[got:])
		if err != nil {
			t.Fatalf("read after %d bytes: %v", got, err)
		}
		got += n
	}
	if string(buf[:got]) != "ping\n" {
		t.Fatalf("read %q; want %q", buf[:got], "ping\n")
	}
}

// TestSpinConnPolls: without a deadline (rueidis's reader goroutine,
// blocking commands) reads do not poll; with one, a read that awaits a
// reply polls for it, and polls find replies that come soon. That last
// needs a CPU to spare: on a machine that has none for 20 s, where every
// poll ends early, the test skips it.
func TestSpinConnPolls(t *testing.T) {
	c, sd := spinPair(t, echoAfter(0))
	for range 5 {
		echoRound(t, c, false)
	}
	if n := sd.polls.Load(); n != 0 {
		t.Fatalf("%d reads without a deadline polled; want none", n)
	}
	for end := time.Now().Add(20 * time.Second); sd.hits.Load() == 0; {
		if time.Now().After(end) {
			if sd.polls.Load() == 0 {
				t.Fatal("no read with a deadline polled in 20 s")
			}
			t.Skipf("no poll of %d found its reply in 20 s: no CPU to spare", sd.polls.Load())
		}
		// Neither misses of a busy machine nor quicker parked reads may
		// stop the polls.
		c.rest.Store(0)
		c.parkRTT.Store(0)
		echoRound(t, c, true)
	}
}

// TestSpinConnGivesUp: a connection whose replies come too late to be
// polled for stops polling after spinGiveUp/spinMiss misses, for
// spinRest reads. (A poll that a busy machine's other threads end is no
// miss, so it may take more polls; with none to spare for 20 s, the test
// skips.)
func TestSpinConnGivesUp(t *testing.T) {
	c, sd := spinPair(t, echoAfter(2*time.Millisecond))
	for end := time.Now().Add(20 * time.Second); c.rest.Load() == 0; {
		if time.Now().After(end) {
			// Polls that a busy machine ends early are no misses.
			t.Skipf("still polling after 20 s of late replies (%d polled): no CPU to spare", sd.polls.Load())
		}
		c.parkRTT.Store(0) // quicker parked reads must not stop the polls
		echoRound(t, c, true)
	}
	if n, want := sd.polls.Load(), int64(spinGiveUp/spinMiss); n < want {
		t.Fatalf("gave up after %d polls; want at least %d", n, want)
	}
	if n := c.rest.Load(); n != spinRest {
		t.Fatalf("%d reads go without polling; want %d", n, spinRest)
	}
	polls := sd.polls.Load()
	echoRound(t, c, true)
	if n := sd.polls.Load(); n != polls {
		t.Fatal("a read polled after the connection gave up")
	}
}

// TestSpinConnLeavesGoroutines: while goroutines wait for a processor,
// a read does not poll, which would keep them waiting, but parks. With
// one processor, busy goroutines wait for it while no other thread wants
// the CPU; the server is the test's Redis, which answers PING from its
// own process.
func TestSpinConnLeavesGoroutines(t *testing.T) {
	c, sd := dialTestRedis(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var stop atomic.Bool
	var wg sync.WaitGroup
	defer func() { stop.Store(true); wg.Wait() }()
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
			}
		})
	}
	buf, ping := make([]byte, 16), []byte("PING\r\n")
	for end := time.Now().Add(20 * time.Second); sd.polls.Load() < 10; {
		if time.Now().After(end) {
			// The server answered before most reads: it shares this
			// CPU, whose write ran it.
			t.Skipf("%d reads polled in 20 s; want 10 to show anything", sd.polls.Load())
		}
		c.parkRTT.Store(0) // quicker parked reads must not stop the polls
		pingRound(t, c, ping, buf)
	}
	if n := sd.hits.Load(); n != 0 {
		t.Fatalf("%d polls found their reply while goroutines waited; want none", n)
	}
}

// TestSpinConnChoosesFaster: reads poll while polled round trips have
// been the shorter, park while parked ones have, and one read in
// spinProbe goes the other way; each read's round trip goes into the
// average of its way.
func TestSpinConnChoosesFaster(t *testing.T) {
	polls := func(c *spinConn) int {
		n := 0
		for range 2 * spinProbe {
			if c.pollNext() {
				n++
			}
		}
		return n
	}
	c := spinConn{born: time.Now()}
	if n := polls(&c); n != 2*spinProbe-2 {
		t.Fatalf("with no round trips yet %d of %d reads polled; want all but 2", n, 2*spinProbe)
	}
	c.pollRTT.Store(30_000)
	c.parkRTT.Store(55_000)
	if n := polls(&c); n != 2*spinProbe-2 {
		t.Fatalf("polled round trips the shorter: %d of %d reads polled; want all but 2", n, 2*spinProbe)
	}
	c.parkRTT.Store(25_000)
	if n := polls(&c); n != 2 {
		t.Fatalf("parked round trips the shorter: %d of %d reads polled; want 2", n, 2*spinProbe)
	}
	c.rest.Store(2 * spinProbe)
	c.pollRTT.Store(1)
	if n := polls(&c); n != 0 {
		t.Fatalf("%d reads polled while the connection rests; want none", n)
	}

	c.owed.Store(true)
	c.wrote.Store(c.nanotime() - 1_000_000)
	c.settle(false)
	if got := c.parkRTT.Load(); got < 25_000+(1_000_000-25_000)/8 {
		t.Fatalf("a parked read of a 1 ms round trip left the average at %d ns; want it moved 1/8 of the way", got)
	}
	if c.owed.Load() {
		t.Fatal("the reply is still owed after its read")
	}
}

// TestSpinConnDeadline: a polling read ends at the deadline with an
// error that says so, as the connection's own Read does.
func TestSpinConnDeadline(t *testing.T) {
	c, _ := spinPair(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	if err := c.SetDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n, err := c.Read(make([]byte, 8))
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read = %d, %v; want 0 and a deadline error", n, err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read error %v is not a net.Error timeout", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("read with a 50 ms deadline returned after %v", took)
	}
}

// TestSpinConnEOF: a polling read of a connection the server closed
// returns io.EOF.
func TestSpinConnEOF(t *testing.T) {
	c, _ := spinPair(t, func(c net.Conn) { c.Read(make([]byte, 8)) })
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("read = %d, %v; want 0, io.EOF", n, err)
	}
}

// TestLoneEnqueuePolls: a lone enqueue, whose reply is read in its own
// goroutine, polls for it when it is not there at once. (With the server
// on the client's CPU, the write may run the server before the read:
// the reply is late here because the server holds writes.)
func TestLoneEnqueuePolls(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server")
	}
	t.Parallel()
	ps := startServer(t)
	s := openPrivate(t, ps)
	job := []backend.NewJob{{Type: "spin", Queue: "spin", Payload: []byte("x")}}
	if _, err := s.Enqueue(t.Context(), backend.EnqueueParams{Now: time.Now(), Jobs: job}); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	polls := s.spin.polls.Load()
	if out, err := ps.cli("CLIENT", "PAUSE", "20", "WRITE"); err != nil {
		t.Fatalf("CLIENT PAUSE: %v %s", err, out)
	}
	if _, err := s.Enqueue(t.Context(), backend.EnqueueParams{Now: time.Now(), Jobs: job}); err != nil {
		t.Fatalf("Enqueue during a pause of writes: %v", err)
	}
	if s.spin.polls.Load() == polls {
		t.Fatal("a lone enqueue whose reply came late did not poll for it")
	}
}

// dialTestRedis dials the test's Redis through a spinDialer, closed when
// the test ends; it skips the test when the dialer made no *spinConn.
func dialTestRedis(t *testing.T) (*spinConn, *spinDialer) {
	t.Helper()
	o, err := ParseURL(testURL())
	if err != nil {
		t.Fatalf("test URL: %v", err)
	}
	sd := &spinDialer{}
	nc, err := sd.dial(t.Context(), o.Addrs[0], &net.Dialer{Timeout: 5 * time.Second}, o.TLS)
	if err != nil {
		backendtest.Unreachable(t, "redis", testURLEnv, testURL(), err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	c, ok := nc.(*spinConn)
	if !ok {
		t.Skipf("dial made a %T (TLS?); want a *spinConn", nc)
	}
	return c, sd
}

// pingRound writes ping ("PING\r\n") on c and reads the reply into buf
// (7 bytes at least), failing the test on an error or another reply. The
// caller makes both buffers, so that a round allocates nothing itself.
func pingRound(t testing.TB, c *spinConn, ping, buf []byte) {
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(ping); err != nil {
		t.Fatalf("write: %v", err)
	}
	got := 0
	for got < len(pong) {
		n, err := c.Read(buf[got:])
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		got += n
	}
	if string(buf[:got]) != pong {
		t.Fatalf("PING: %q", buf[:got])
	}
}

// pong is the reply pingRound wants.
const pong = "+PONG\r\n"
