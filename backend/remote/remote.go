// Package remote is a backend.Backend that speaks the REST API of a kyu
// server (package server), so that a Client or Worker on another machine
// uses http://host:7420 as its store:
//
//	b, err := remote.Open("http://kyu.internal:7420", remote.Options{Token: token})
//	client := kyu.NewClient(b, kyu.ClientConfig{})
//
// Every contract method maps onto one request: claims go to
// /api/v1/claim, heartbeats, completions, failures, releases and reports
// travel in batches through /api/v1/leases/*, and Subscribe and
// WatchFinished hold a server-sent event stream (/api/v1/wakeups) open.
// Errors come back as the contract's errors (ErrNotFound, ErrLeaseLost,
// *ValidationError, *StateError, ...), so callers test them as they would
// in-process.
//
// Every call that takes a Now sends it in the Kyu-Now header. A
// production server ignores it and uses its own clock; a server started
// with a test clock (server.Config.Clock) honours it, which is how the
// conformance suite drives time through HTTP.
package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// Options tune a remote backend.
type Options struct {
	// Token is sent as "Authorization: Bearer <token>" when set. A
	// password in the URL (http://:token@host) is used when Token is empty.
	Token string
	// HTTPClient makes the requests; default: a client with keep-alive
	// connections sized for a busy worker. Its Timeout must be zero or
	// longer than any stream is meant to last; calls are bounded by their
	// contexts and by RequestTimeout.
	HTTPClient *http.Client
	// RequestTimeout bounds one request (not the wake-up streams);
	// default 60s.
	RequestTimeout time.Duration
	// Logger receives the backend's logs; nil discards them.
	Logger *slog.Logger
}

// Backend talks to one kyu server, as Open returns it: a backend.Backend
// whose every method checks its input first (backend.Checked), before any
// request. It is safe for concurrent use.
type Backend struct {
	backend.Backend
	unchecked
}

// unchecked is the backend behind the checks. Embedded, it lends Backend
// its state and helpers (for the package's tests), never its
// backend.Backend methods, which the checked Backend shadows.
type unchecked struct{ *httpBackend }

// httpBackend implements backend.Backend over HTTP on input that
// backend.Checked has checked.
type httpBackend struct {
	base    string // scheme://host[:port][/prefix], no trailing slash
	token   string
	hc      *http.Client
	timeout time.Duration
	log     *slog.Logger
	closed  atomic.Bool
	// ctx ends the wake-up streams at Close.
	ctx    context.Context
	cancel context.CancelFunc
}

var _ backend.Backend = (*httpBackend)(nil)

// Open returns a backend for the server at rawURL (http:// or https://).
// It does not contact the server.
func Open(rawURL string, opts Options) (*Backend, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("remote: malformed server URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("remote: server URL scheme %q: want http or https", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("remote: server URL: missing host")
	}
	token := opts.Token
	if pw, ok := u.User.Password(); ok && token == "" {
		token = pw
	}
	if opts.HTTPClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns = 256
		t.MaxIdleConnsPerHost = 128
		t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		opts.HTTPClient = &http.Client{Transport: t}
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 60 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	base := u.Scheme + "://" + u.Host + strings.TrimRight(u.Path, "/")
	b := &httpBackend{base: base, token: token, hc: opts.HTTPClient, timeout: opts.RequestTimeout, log: opts.Logger, ctx: ctx, cancel: cancel}
	return &Backend{Backend: backend.Checked(b), unchecked: unchecked{b}}, nil
}

// MaxPayload is the payload bound backend.Checked applies to an Enqueue
// whose MaxPayload is 0: none here, since the server applies its own
// (which may be above backend.DefaultMaxPayload). A caller's smaller
// MaxPayload still applies before any request.
func (b *httpBackend) MaxPayload() int { return math.MaxInt }

// Close ends the wake-up streams and refuses later calls with ErrClosed.
// It does not touch the server. It is safe to call more than once.
func (b *httpBackend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	b.cancel()
	b.hc.CloseIdleConnections()
	return nil
}

// call sends one request and decodes a success answer into out (when not
// nil). withNow sends now as the Kyu-Now header. An error answer becomes
// the contract's error.
func (b *httpBackend) call(ctx context.Context, method, path string, withNow bool, now time.Time, in, out any) error {
	if b.closed.Load() {
		return backend.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(in); err != nil {
			return fmt.Errorf("remote: encode %s %s: %w", method, path, err)
		}
		body = &buf
	}
	req, err := http.NewRequestWithContext(ctx, method, b.base+path, body)
	if err != nil {
		return fmt.Errorf("remote: %s %s: %w", method, path, err)
	}
	if in != nil || (method != http.MethodGet && method != http.MethodHead) {
		// The server asks it of every state change, body or not.
		req.Header.Set("Content-Type", "application/json")
	}
	b.authorize(req)
	if withNow {
		req.Header.Set(api.NowHeader, now.Format(time.RFC3339Nano))
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		if b.closed.Load() {
			return backend.ErrClosed
		}
		return fmt.Errorf("remote: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("remote: %s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var eb api.ErrorBody
		if json.Unmarshal(raw, &eb) != nil || eb.Error.Code == "" {
			return fmt.Errorf("remote: %s %s: HTTP %d: %.200s", method, path, resp.StatusCode, raw)
		}
		return wrapErr(eb.Error.Err())
	}
	// A 204 leaves out as it is: a server older than the answer out
	// expects (PUT /api/v1/workers/{id} answered 204 before it carried
	// the worker's command) answers nothing.
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("remote: %s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}

// wrapErr returns the contract's errors as they are (so a
// *ValidationError stays the value callers unwrap, and "job not found"
// reads as it does in-process) and names the others.
func wrapErr(err error) error {
	var ve *backend.ValidationError
	var se *backend.StateError
	if errors.As(err, &ve) || errors.As(err, &se) {
		return err
	}
	for _, contract := range []error{backend.ErrNotFound, backend.ErrLeaseLost, backend.ErrJobActive,
		backend.ErrWrongState, backend.ErrUniqueKeyHeld, backend.ErrNotSupported} {
		if errors.Is(err, contract) {
			return err
		}
	}
	return fmt.Errorf("remote: %w", err)
}

// authorize adds the bearer token.
func (b *httpBackend) authorize(req *http.Request) {
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
}

// itemErrors turns per-item results into the contract's BatchResult.
func itemErrors(rs []api.ItemResult, n int) (backend.BatchResult, error) {
	if len(rs) != n {
		return backend.BatchResult{}, fmt.Errorf("remote: the server answered %d results for %d items", len(rs), n)
	}
	out := backend.BatchResult{Errors: make([]error, n)}
	for i, r := range rs {
		if r.Error != nil {
			out.Errors[i] = r.Error.Err()
		} else if !r.OK {
			out.Errors[i] = errors.New("remote: the server gave no outcome for this item")
		}
	}
	return out, nil
}

// jobPath is the path of a job, or below it.
func jobPath(id string, rest ...string) string {
	return "/api/v1/jobs/" + url.PathEscape(id) + strings.Join(rest, "")
}
