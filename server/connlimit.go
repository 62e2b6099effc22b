package server

import (
	"net"
	"sync"
)

// limitListener accepts at most cap(slots) connections open at once:
// Accept waits for one to close before it takes the next from the listen
// backlog (see Config.MaxConns).
type limitListener struct {
	net.Listener
	slots chan struct{}
	// closed is closed by Close, ending an Accept that waits for a slot.
	closed    chan struct{}
	closeOnce sync.Once
}

// newLimitListener wraps ln to hold at most max connections open.
func newLimitListener(ln net.Listener, max int) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, max), closed: make(chan struct{})}
}

// Accept waits for a free slot, then accepts a connection that gives the
// slot back when closed.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

// Close closes the listener and ends a waiting Accept.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// limitedConn gives its listener's slot back once, at its first Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// Close closes the connection and frees its slot.
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
