//go:build linux

package redis

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"os"
	"runtime/metrics"
	"sync/atomic"
	"syscall"
	"time"
)

// A call whose reply rueidis reads in the calling goroutine (a run's
// connection of its own, runconn.go) parks that goroutine in the Go
// runtime's poller until the reply comes; with nothing else to run, its
// thread sleeps and its CPU idles. On a virtual machine the reply then
// wakes an idle virtual CPU through the host: a lone enqueue took 59-67
// µs (p50) with the client and Redis pinned to two CPUs of the 2-core
// test host against 24 µs with both on one. spinConn polls the socket for
// the reply a while instead (spinFor), yielding the CPU between polls,
// so that the reply finds the caller awake: 39-47 µs on two CPUs.
//
// A poll ends at once when goroutines wait for a processor, which it
// would hold, and when a yield let another thread run (spinShared): the
// CPU is wanted, by the server itself maybe, which is then likely done
// (the read that follows finds its reply) and otherwise is not kept from
// the CPU. Where the server shares the client's CPU, a reply comes
// sooner to a caller that parks at once, so a connection polls only
// while polled round trips have been the shorter (pollNext). A poll that
// runs out of time is a miss: the server is remote or slow. A connection
// whose misses outweigh its hits goes without polling for spinRest
// reads, then tries again, so that a remote server costs a few polls per
// spinRest reads.
const (
	// spinFor bounds a poll: a lone enqueue's reply came 20-25 µs after
	// its write on the test host's two idle CPUs.
	spinFor = 50 * time.Microsecond
	// spinShared is how long a yield takes at most when no other thread
	// wants this CPU; a longer one means another ran.
	spinShared = 3 * time.Microsecond
	// spinMiss and spinHit move a connection's score; at spinGiveUp it
	// polls no more for spinRest reads.
	spinMiss, spinHit, spinGiveUp = 4, 1, 32
	spinRest                      = 1024
	// spinProbe: one read in spinProbe goes the way not taken.
	spinProbe = 16
)

// spinConn is a TCP connection that polls for a reply (see spinFor). It
// polls only in a read that follows a write and while a deadline is set:
// rueidis sets one for each call it makes in the caller's goroutine, and
// clears it for blocking commands and for good when the connection
// passes to its writer and reader goroutines, whose reader waits for
// replies of calls of any goroutine (and pub/sub messages), which polling
// would not serve.
type spinConn struct {
	net.Conn
	raw      syscall.RawConn
	deadline atomic.Bool // a deadline is set
	owed     atomic.Bool // a write came after the last read of data
	score    atomic.Int32
	rest     atomic.Int32 // reads left without polling
	wrote    atomic.Int64 // when the write the reply is owed for began (c.nanotime)
	born     time.Time    // the origin of c.nanotime
	// pollRTT and parkRTT average, in ns, the round trips (write to
	// reply) of reads that polled and of reads that parked at once (0:
	// none yet); reads is how many reads awaited a reply.
	pollRTT, parkRTT atomic.Int64
	reads            atomic.Int64
	runnable         []metrics.Sample
	dialer           *spinDialer
	// poll is c.pollRead, made once: a closure made at each read that
	// polls would be an allocation a call. It keeps its state in ps.
	poll func(fd uintptr) bool
	ps   spinPoll
}

// spinPoll is the state of the read that polls (the connection's reads
// run one at a time), which spinConn.pollRead works on.
type spinPoll struct {
	p           []byte // the read's buffer
	n           int
	err         error
	start       time.Time
	polled      bool // a poll found nothing
	missed      bool // out of time
	shared      bool // other threads or goroutines want the CPU
	stopPolling bool
}

// spinDialer dials a store's connections (ClientOption.DialCtxFn):
// spinConn for plain TCP, TLS connections as rueidis makes them.
type spinDialer struct {
	polls atomic.Int64 // reads that polled
	hits  atomic.Int64 // polls that found their reply
}

func (sd *spinDialer) dial(ctx context.Context, dst string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
	if cfg != nil {
		td := tls.Dialer{NetDialer: d, Config: cfg}
		return td.DialContext(ctx, "tcp", dst)
	}
	c, err := d.DialContext(ctx, "tcp", dst)
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c, nil
	}
	sc := &spinConn{Conn: tc, raw: raw, born: time.Now(), dialer: sd, runnable: []metrics.Sample{{Name: runnableMetric}}}
	sc.poll = sc.pollRead
	return sc, nil
}

func (c *spinConn) SetDeadline(t time.Time) error {
	c.deadline.Store(!t.IsZero())
	return c.Conn.SetDeadline(t)
}

func (c *spinConn) SetReadDeadline(t time.Time) error {
	c.deadline.Store(!t.IsZero())
	return c.Conn.SetReadDeadline(t)
}

func (c *spinConn) Write(p []byte) (int, error) {
	if !c.owed.Swap(true) {
		c.wrote.Store(c.nanotime())
	}
	return c.Conn.Write(p)
}

// nanotime is the monotonic clock in ns since the connection was made.
func (c *spinConn) nanotime() int64 { return int64(time.Since(c.born)) }

// pollNext reports whether the next read that awaits a reply polls. It
// polls while polled round trips have been the shorter, and one read in
// spinProbe goes the other way, so that both averages follow the
// machine: with the server on this CPU, the reply comes sooner to a
// caller that parks (the server runs at once on the CPU it leaves) than
// to one that keeps the CPU, even yielding.
func (c *spinConn) pollNext() bool {
	if c.rest.Load() > 0 {
		c.rest.Add(-1)
		return false
	}
	poll := c.pollRTT.Load() <= c.parkRTT.Load() || c.parkRTT.Load() == 0
	if c.reads.Add(1)%spinProbe == 0 {
		poll = !poll
	}
	return poll
}

// settle ends a read that awaited a reply and got data: the round trip
// goes into the average of its way.
func (c *spinConn) settle(polled bool) {
	c.owed.Store(false)
	rtt := c.nanotime() - c.wrote.Load()
	avg := &c.parkRTT
	if polled {
		avg = &c.pollRTT
	}
	if a := avg.Load(); a == 0 {
		avg.Store(rtt)
	} else {
		avg.Store(a + (rtt-a)/8)
	}
}

func (c *spinConn) Read(p []byte) (int, error) {
	if len(p) == 0 || !c.owed.Load() || !c.deadline.Load() {
		return c.Conn.Read(p)
	}
	if !c.pollNext() {
		n, err := c.Conn.Read(p)
		if n > 0 {
			c.settle(false)
		}
		return n, err
	}
	c.ps = spinPoll{p: p}
	rerr := c.raw.Read(c.poll)
	ps := c.ps
	c.ps = spinPoll{} // not the caller's buffer
	n, err, polled, missed, shared := ps.n, ps.err, ps.polled, ps.missed, ps.shared
	if polled {
		c.dialer.polls.Add(1)
	}
	switch {
	case missed:
		if c.score.Add(spinMiss) >= spinGiveUp {
			c.score.Store(0)
			c.rest.Store(spinRest)
		}
	case polled && !shared:
		c.dialer.hits.Add(1)
		if c.score.Load() > 0 {
			c.score.Add(-spinHit)
		}
	}
	if rerr != nil {
		return 0, rerr
	}
	if err != nil {
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("read", err)}
	}
	if n <= 0 {
		return 0, io.EOF
	}
	c.settle(true)
	return n, nil
}

// pollRead is the body of a read that polls (spinConn.Read), given the
// socket by its RawConn: it reads until data comes, an error, or it
// stops polling and parks (returns false; it is called again once the
// socket is readable).
func (c *spinConn) pollRead(fd uintptr) bool {
	ps := &c.ps
	for {
		ps.n, ps.err = syscall.Read(int(fd), ps.p)
		if ps.err == syscall.EINTR {
			continue
		}
		if ps.err != syscall.EAGAIN {
			return true
		}
		if ps.stopPolling {
			return false // park; called again once readable
		}
		now := time.Now()
		if !ps.polled {
			ps.polled, ps.start = true, now
		} else if now.Sub(ps.start) > spinFor {
			ps.missed, ps.stopPolling = true, true
			return false
		}
		if c.goroutinesWait() {
			ps.shared, ps.stopPolling = true, true // polling would keep them waiting
			return false
		}
		syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
		if time.Since(now) > spinShared {
			ps.shared, ps.stopPolling = true, true
		}
	}
}

// runnableMetric counts the goroutines waiting for a processor: reading
// it costs about 50 ns.
const runnableMetric = "/sched/goroutines/runnable:goroutines"

// goroutinesWait reports whether goroutines wait for a processor, which
// a poll would hold. The connection's reads run one at a time.
func (c *spinConn) goroutinesWait() bool {
	metrics.Read(c.runnable)
	v := c.runnable[0].Value
	return v.Kind() == metrics.KindUint64 && v.Uint64() > 0
}
