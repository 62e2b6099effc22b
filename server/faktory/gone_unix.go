//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package faktory

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the client closed its side of nc: a peek at
// the socket, without waiting, finds its end (or a reset). False when
// data waits, nothing does yet, or it cannot tell.
func peerClosed(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var buf [1]byte
	_ = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = (n == 0 && err == nil) || errors.Is(err, syscall.ECONNRESET)
		return true
	})
	return closed
}
