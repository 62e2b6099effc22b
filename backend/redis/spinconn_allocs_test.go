//go:build linux && !race

package redis

import "testing"

// TestSpinConnPollAllocs: a read that polls for its reply allocates
// nothing (a closure made at each such read was one allocation a call).
// The server is the test's Redis, which answers PING from its own
// process, so that no server goroutine allocates in the count. Not under
// the race detector, which allocates for itself.
func TestSpinConnPollAllocs(t *testing.T) {
	c, sd := dialTestRedis(t)
	buf := make([]byte, 16)
	ping := []byte("PING\r\n")
	round := func() {
		// Neither misses nor quicker parked reads may stop the polls.
		c.rest.Store(0)
		c.parkRTT.Store(0)
		pingRound(t, c, ping, buf)
	}
	round()
	for range 10 {
		polls := sd.polls.Load()
		n := testing.AllocsPerRun(200, round)
		if sd.polls.Load() == polls {
			continue // the server answered before each read
		}
		if n != 0 {
			t.Errorf("a round trip whose read polls allocates %.2f times; want none", n)
		}
		return
	}
	t.Skip("no read polled in 2,000 round trips: the server answered before each")
}
