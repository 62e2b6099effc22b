package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kyuhq/kyu/backend/backendurl"
	"github.com/kyuhq/kyu/server"
)

// tokenEnv names the environment variable that gives the token.
const tokenEnv = "KYU_TOKEN"

// serverShutdownGrace bounds how long `kyu server` drains requests in
// flight after a signal.
const serverShutdownGrace = 30 * time.Second

// serverFlags are the flags of `kyu server`.
type serverFlags struct {
	addr       string
	backendURL string
	token      string
	insecure   bool
	tlsCert    string
	tlsKey     string
	verbose    bool
	basePath   string
	readOnly   bool

	// allowedHosts are Host names taken besides the loopback ones.
	allowedHosts []string
	bodyTimeout  time.Duration
	maxConns     int
	tokenFile    string

	// faktoryAddr, faktoryPassword and faktoryAllowFlush configure the
	// Faktory protocol listener (off without an address).
	faktoryAddr       string
	faktoryPassword   string
	faktoryAllowFlush bool

	// memoryLimit is --memory-limit; memoryLimitSet says it was given.
	memoryLimit    string
	memoryLimitSet bool
	// terminal says stdout is a terminal: a person is watching, so the
	// server says how to reach and stop it.
	terminal bool
}

// newServerCommand builds `kyu server`.
func newServerCommand() *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Serve the dashboard, REST API, event stream and metrics over a store",
		Long: `Serve the web dashboard (at /), the kyu REST API (/api/v1, OpenAPI
document at /api/v1/openapi.json), server-sent events, Prometheus metrics
(/metrics) and health probes (/healthz, /readyz) over a store, and run the
store's maintenance (promotion of due jobs, lease recovery, retention)
while the servers and workers sharing the store elect this one to.
--base-path serves all of it under a prefix, for a proxy.

Workers and producers in other processes reach it with the backend URL
http://ADDR. The embedded store belongs to one process at a time, so
while the server runs it, everything else goes through the server.

With a token every /api/ and /metrics request needs "Authorization:
Bearer <token>", and the dashboard asks for the token once on a login
page (the session lasts 12 hours). Give it in KYU_TOKEN or in a file (--token-file); --token
puts it on the command line, where other users of the machine see it (ps).
Listening beyond loopback without a token is refused unless --insecure is
given, and then logged as a warning.

Without a token, a server on loopback answers only requests whose Host is
localhost, 127.0.0.1 or [::1] (any port), so that no web page can reach it
under a name of its own; --allowed-hosts adds names, such as a proxy's.
Every request that changes state must say Content-Type: application/json,
and one that a browser marks as coming from another site is refused.
--faktory-addr also speaks the Faktory work protocol there, so Faktory's
clients (Ruby, Node, Go...) push and run jobs on this store unchanged;
they must give --faktory-password, which is the token unless set (see
docs/faktory.md).
--read-only refuses every change with 403 except the calls workers make
(claims, leases, progress, logs, their registry entries).

The Go heap gets a soft limit (--memory-limit; by default 192MiB above the
heap live once the store is open; GOMEMLIMIT is kept when set): the garbage collector works harder near it rather than
let the heap grow to twice what is live. The embedded store's memtables
and block cache are outside it.

The address it listens on and the dashboard's URL are printed to stdout
(on a terminal, with the REST API's URL and how to stop it); logs go to stderr, the embedded
store's absolute directory among them.
SIGINT or SIGTERM drains requests in flight and stops.`,
		Example: `  kyu server
  kyu server --addr 0.0.0.0:7420 --token-file /etc/kyu/token
  KYU_TOKEN=... kyu server --addr 0.0.0.0:7420
  kyu server --backend pebble:///var/lib/kyu --tls-cert cert.pem --tls-key key.pem
  kyu server --backend memory://    # a demo: its jobs are gone when it stops`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.memoryLimitSet = cmd.Flags().Changed("memory-limit")
			f.terminal = isTerminal(cmd.OutOrStdout())
			return runServer(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", server.DefaultAddr, "address to listen on")
	fl.StringVar(&f.backendURL, "backend", backendurl.DefaultURL, "store to serve, as a URL")
	fl.StringVar(&f.token, "token", "", "bearer token required on /api/ and /metrics (default $"+tokenEnv+"; shows in ps: prefer $"+tokenEnv+" or --token-file)")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the bearer token (surrounding white space ignored)")
	fl.BoolVar(&f.insecure, "insecure", false, "allow listening beyond loopback without a token")
	fl.StringSliceVar(&f.allowedHosts, "allowed-hosts", nil, "without a token, Host names to answer besides localhost, 127.0.0.1 and [::1] (a proxy's name; comma-separated or repeated)")
	fl.DurationVar(&f.bodyTimeout, "body-timeout", server.DefaultBodyTimeout, "time allowed to receive a request body, from the end of its headers")
	fl.IntVar(&f.maxConns, "max-conns", server.DefaultMaxConns, "connections open at once; more wait in the listen backlog")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate file (with --tls-key)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "TLS key file (with --tls-cert)")
	fl.StringVar(&f.memoryLimit, "memory-limit", strconv.Itoa(defaultMemoryLimit>>20)+"MiB", "soft limit on the Go heap, which the garbage collector works to stay under: a size such as 512MiB, or off (when not given: $"+memoryLimitEnv+", else $GOMEMLIMIT, else the default)")
	fl.StringVar(&f.basePath, "base-path", "", "path prefix to serve under, for a proxy that forwards a path such as /kyu")
	fl.BoolVar(&f.readOnly, "read-only", false, "refuse every change (403) except workers' calls; the dashboard shows no actions")
	fl.StringVar(&f.faktoryAddr, "faktory-addr", "", "also speak the Faktory work protocol on this address (such as 127.0.0.1:7419), for Faktory's clients; off when empty")
	fl.StringVar(&f.faktoryPassword, "faktory-password", "", "password Faktory clients must give (default: the token); required beyond loopback unless --insecure")
	fl.BoolVar(&f.faktoryAllowFlush, "faktory-allow-flush", false, "let a Faktory client's FLUSH wipe the whole store")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log debug messages")
	return cmd
}

// runServer opens the store, serves until ctx ends, then drains.
func runServer(ctx context.Context, f serverFlags, stdout, stderr io.Writer) (err error) {
	level := slog.LevelInfo
	if f.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if err := f.resolveToken(); err != nil {
		return err
	}
	cfg := server.Config{
		Addr: f.addr, Token: f.token, Insecure: f.insecure, AllowedHosts: f.allowedHosts,
		BodyTimeout: f.bodyTimeout, MaxConns: f.maxConns,
		TLSCertFile: f.tlsCert, TLSKeyFile: f.tlsKey, Logger: log,
		BasePath: f.basePath, ReadOnly: f.readOnly, Store: describeBackend(f.backendURL),
		FaktoryAddr: f.faktoryAddr, FaktoryPassword: f.faktoryPassword, FaktoryAllowFlush: f.faktoryAllowFlush,
	}
	// Refuse a bad address before the store exists: opening an embedded
	// store creates its directory.
	if err := cfg.CheckListen(); err != nil {
		return &UsageError{Err: err}
	}
	limit, from, set, err := memoryLimit(f.memoryLimit, f.memoryLimitSet, os.Getenv)
	if err != nil {
		return &UsageError{Err: err}
	}
	if set {
		// The limit is the process's; put the previous one back for a
		// caller that runs the server inside a longer-lived process.
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(limit))
	}
	if dir, ok := backendurl.EmbeddedDir(f.backendURL); ok {
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
		log.Info("kyu server embedded store", "dir", dir)
	}
	b, err := backendurl.Open(ctx, f.backendURL, backendurl.Options{Logger: log, Token: os.Getenv(tokenEnv)})
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	started := false
	defer func() {
		if cerr := b.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("server: close store: %w", cerr))
		}
		if started && err == nil {
			log.Info("kyu server stopped")
		}
	}()
	if from == "default" {
		// Counted from what the store holds once open (see aboveLiveHeap).
		debug.SetMemoryLimit(aboveLiveHeap(limit))
	}
	log.Debug("kyu server memory limit", "bytes", debug.SetMemoryLimit(-1), "from", from)
	cfg.Backend = b
	srv, err := server.New(cfg)
	if err != nil {
		return &UsageError{Err: err}
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	started = true
	scheme := "http"
	if f.tlsCert != "" {
		scheme = "https"
	}
	root := fmt.Sprintf("%s://%s%s", scheme, srv.Addr(), f.basePath)
	fmt.Fprintf(stdout, "kyu server listening on %s://%s (backend %s)\n", scheme, srv.Addr(), describeBackend(f.backendURL))
	fmt.Fprintf(stdout, "Dashboard: %s/\n", root)
	if a := srv.FaktoryAddr(); a != nil {
		fmt.Fprintf(stdout, "Faktory protocol: tcp://%s\n", a)
	}
	if f.terminal {
		fmt.Fprintf(stdout, "REST API: %s/api/v1 (OpenAPI document at %s/api/v1/openapi.json)\nPress Ctrl+C to stop.\n", root, root)
	}
	<-ctx.Done()
	log.Info("kyu server shutting down", "grace", serverShutdownGrace)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serverShutdownGrace)
	defer cancel()
	return srv.Shutdown(sctx)
}

// resolveToken sets f.token from --token, else --token-file, else
// KYU_TOKEN.
func (f *serverFlags) resolveToken() error {
	if f.tokenFile != "" {
		if f.token != "" {
			return &UsageError{Err: errors.New("server: give the token once: --token or --token-file")}
		}
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return &UsageError{Err: fmt.Errorf("server: token file: %w", err)}
		}
		f.token = strings.TrimSpace(string(b))
		if f.token == "" {
			return &UsageError{Err: fmt.Errorf("server: token file %s is empty", f.tokenFile)}
		}
	}
	if f.token == "" {
		f.token = os.Getenv(tokenEnv)
	}
	return nil
}
