package server

import (
	"context"
	"net"
	"time"

	"github.com/kyuhq/kyu/server/faktory"
)

// buildFaktory builds the Faktory listener when Config.FaktoryAddr asks
// for one: it shares the server's store, clock, backoff and limits.
func (s *Server) buildFaktory() error {
	if s.cfg.FaktoryAddr == "" {
		return nil
	}
	l, err := faktory.New(faktory.Config{
		Backend: s.b, Addr: s.cfg.FaktoryAddr, Password: s.cfg.FaktoryPassword,
		AllowFlush: s.cfg.FaktoryAllowFlush, Logger: s.log, Now: s.clockNow,
		RetryAt: func(now time.Time, attempt int, err error) time.Time {
			return retryTime(now, s.cfg.Backoff(attempt, err))
		},
		MaxLine: int(s.cfg.MaxBodyBytes), MaxPayload: s.cfg.MaxPayload, MaxBatch: s.cfg.MaxBatch,
	})
	if err != nil {
		return err
	}
	s.faktory = l
	return nil
}

// startFaktory starts the Faktory listener, if any.
func (s *Server) startFaktory(ctx context.Context) error {
	if s.faktory == nil {
		return nil
	}
	return s.faktory.Start(ctx)
}

// shutdownFaktory stops the Faktory listener, if any.
func (s *Server) shutdownFaktory(ctx context.Context) error {
	if s.faktory == nil {
		return nil
	}
	return s.faktory.Shutdown(ctx)
}

// FaktoryAddr returns the address the Faktory listener listens on, or
// nil when there is none or before Start.
func (s *Server) FaktoryAddr() net.Addr {
	if s.faktory == nil {
		return nil
	}
	return s.faktory.Addr()
}
