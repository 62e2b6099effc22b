//go:build !linux

package redis

import (
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
)

// spinDialer dials as rueidis does: the poll for replies (spinconn.go)
// is Linux's.
type spinDialer struct {
	polls, hits atomic.Int64 // always 0
}

func (sd *spinDialer) dial(ctx context.Context, dst string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
	if cfg != nil {
		td := tls.Dialer{NetDialer: d, Config: cfg}
		return td.DialContext(ctx, "tcp", dst)
	}
	return d.DialContext(ctx, "tcp", dst)
}
