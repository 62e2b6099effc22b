package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/internal/lifecycle"
	"github.com/kyuhq/kyu/server/dashboard"
	"github.com/kyuhq/kyu/server/faktory"
)

// Server serves the kyu API over one backend. Build it with New.
type Server struct {
	cfg     Config
	log     *slog.Logger
	b       backend.Backend
	handler http.Handler
	routes  []route
	// openAPIDoc is the OpenAPI document of routes, built once.
	openAPIDoc []byte
	metrics    *metrics
	idem       *idempotency
	events     *hub
	// sessions checks dashboard logins; nil without a token.
	sessions *dashboard.Sessions
	// dashboard serves every path outside /api/.
	dashboard *dashboard.Dashboard
	// faktory speaks the Faktory protocol; nil without FaktoryAddr.
	faktory *faktory.Listener
	// polls is a semaphore bounding the requests that wait.
	polls chan struct{}
	// bodies bounds the large request bodies handled at once; see
	// Config.MaxBodyBytesInFlight.
	bodies *bodyGate
	// stopping is closed when Shutdown begins, ending every wait.
	stopping     chan struct{}
	shutdownOnce sync.Once
	shutdownErr  error

	mu      sync.Mutex
	httpSrv *http.Server
	ln      net.Listener
	ready   chan struct{}
	served  chan error

	maint  lifecycle.Loop
	ticker lifecycle.Loop
}

// New checks cfg and builds a Server; nothing listens until Start.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		b:        cfg.Backend,
		polls:    make(chan struct{}, cfg.MaxLongPolls),
		bodies:   newBodyGate(cfg.MaxBodyBytesInFlight),
		stopping: make(chan struct{}),
		ready:    make(chan struct{}),
		idem:     newIdempotency(cfg.IdempotencyTTL, cfg.IdempotencyEntries, cfg.IdempotencyBytes),
		events:   newHub(),
	}
	s.metrics = newMetrics(s)
	if err := s.buildDashboard(); err != nil {
		return nil, err
	}
	if err := s.buildFaktory(); err != nil {
		return nil, err
	}
	s.routes = s.routeTable()
	doc, err := s.openAPI()
	if err != nil {
		return nil, err
	}
	s.openAPIDoc = doc
	s.handler = s.buildHandler()
	return s, nil
}

// Handler returns the server's routes and dashboard as one http.Handler
// (auth, limits, the Host and cross-origin checks and error answers
// included), for mounting under another mux or serving with httptest.
// Start serves the same handler. Without a Token it answers only loopback
// Host names unless Config.AllowedHosts names more. The body deadline applies where
// the ResponseWriter lets it be set.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on Config.Addr and serves in the background, and starts
// the maintainer and the event ticker. ctx bounds only the start;
// Shutdown stops the server.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.httpSrv != nil {
		return errors.New("server: already started")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("server: listen: %w", err)
	}
	if err := s.startFaktory(ctx); err != nil {
		ln.Close()
		return err
	}
	ln = newLimitListener(ln, s.cfg.MaxConns)
	s.ln = ln
	s.httpSrv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    netMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.served = make(chan error, 1)
	tls := s.cfg.TLSCertFile != ""
	go func() {
		var err error
		if tls {
			err = s.httpSrv.ServeTLS(ln, s.cfg.TLSCertFile, s.cfg.TLSKeyFile)
		} else {
			err = s.httpSrv.Serve(ln)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.served <- err
	}()
	s.startBackground()
	close(s.ready)
	s.log.Info("kyu server listening", "addr", ln.Addr().String(), "tls", tls, "auth", s.cfg.Token != "")
	if s.cfg.Token == "" && !isLoopback(addrHost(s.cfg.Addr)) {
		s.log.Warn("kyu server: listening beyond loopback without a token (--insecure): anyone who can reach this address can run, change and delete jobs", "addr", ln.Addr().String())
	}
	return nil
}

// startBackground starts the maintainer and the event ticker. Their
// context is independent of Start's, and Shutdown stops them.
func (s *Server) startBackground() {
	bg := context.Background()
	if s.cfg.MaintenanceInterval > 0 {
		s.startMaintenance(bg)
	}
	s.ticker.Start(bg, s.tickEvents)
}

// Ready is closed once Start has its listener and serves.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Addr returns the address the server listens on (useful with port 0),
// or nil before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Shutdown ends every long-poll and event stream, stops accepting
// connections, waits for requests in flight until ctx is done (then
// closes the connections left), and stops the background loops. It does
// not close the backend. Later calls return the first call's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() { s.shutdownErr = s.shutdown(ctx) })
	return s.shutdownErr
}

// shutdown does the work of Shutdown once.
func (s *Server) shutdown(ctx context.Context) error {
	close(s.stopping)
	s.mu.Lock()
	srv, served := s.httpSrv, s.served
	s.mu.Unlock()
	err := s.shutdownFaktory(ctx)
	if srv != nil {
		if serr := srv.Shutdown(ctx); serr != nil {
			err = fmt.Errorf("server: shutdown: %w", serr)
			srv.Close()
		}
		if serveErr := <-served; serveErr != nil {
			err = errors.Join(err, fmt.Errorf("server: serve: %w", serveErr))
		}
	}
	s.maint.Stop()
	s.ticker.Stop()
	return err
}

// now is the caller's clock for request r: the system clock, or under a
// test clock the Kyu-Now header when present.
func (s *Server) now(r *http.Request) (time.Time, error) {
	if s.cfg.Clock == nil {
		return time.Now(), nil
	}
	if h := r.Header.Get(nowHeader); h != "" {
		t, err := time.Parse(time.RFC3339Nano, h)
		if err != nil {
			return time.Time{}, &backend.ValidationError{Index: -1, Field: nowHeader, Reason: "not an RFC 3339 time"}
		}
		return t, nil
	}
	return s.cfg.Clock.Now(), nil
}

// clockNow is the server's own clock, for its background work.
func (s *Server) clockNow() time.Time {
	if s.cfg.Clock != nil {
		return s.cfg.Clock.Now()
	}
	return time.Now()
}

// acquirePoll takes a long-poll slot if one is free.
func (s *Server) acquirePoll() bool {
	select {
	case s.polls <- struct{}{}:
		return true
	default:
		s.metrics.pollsRefused.Inc()
		return false
	}
}

// releasePoll gives a long-poll slot back.
func (s *Server) releasePoll() { <-s.polls }
