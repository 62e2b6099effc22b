package remote

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// Subscribe opens a wake-up stream for the queues (every queue when none
// is named). It returns once the server has its subscription in place, so
// every later change is heard. A stream that breaks is reopened, with a
// signal, since a change may have been missed meanwhile.
func (b *httpBackend) Subscribe(ctx context.Context, p backend.SubscribeParams) (*backend.Subscription, error) {
	q := url.Values{}
	for _, name := range p.Queues {
		q.Add("queue", name)
	}
	return b.wakeups(ctx, q)
}

// WatchFinished opens a wake-up stream for the named jobs' ends.
func (b *httpBackend) WatchFinished(ctx context.Context, p backend.WatchParams) (*backend.Subscription, error) {
	if len(p.IDs) == 0 {
		if b.closed.Load() {
			return nil, backend.ErrClosed
		}
		c := make(chan struct{})
		return backend.NewSubscription(c, func() {}), nil
	}
	q := url.Values{}
	for _, id := range p.IDs {
		q.Add("job", id)
	}
	return b.wakeups(ctx, q)
}

// wakeups opens /api/v1/wakeups with the query q and feeds its "wake"
// events into a subscription.
func (b *httpBackend) wakeups(ctx context.Context, q url.Values) (*backend.Subscription, error) {
	if b.closed.Load() {
		return nil, backend.ErrClosed
	}
	// The stream lives until the subscription or the backend is closed,
	// not as long as ctx (which bounds only the opening).
	sctx, cancel := context.WithCancel(b.ctx)
	body, err := b.openStream(ctx, sctx, q)
	if err != nil {
		cancel()
		if b.closed.Load() {
			return nil, backend.ErrClosed
		}
		return nil, err
	}
	c := make(chan struct{}, 1)
	signal := func() {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	go b.readStream(sctx, body, q, signal)
	return backend.NewSubscription(c, cancel), nil
}

// openStream opens the stream under sctx and reads up to its "ready"
// event, giving up when ctx ends first.
func (b *httpBackend) openStream(ctx, sctx context.Context, q url.Values) (*bufio.Reader, error) {
	req, err := http.NewRequestWithContext(sctx, "GET", b.base+"/api/v1/wakeups?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("remote: wake-ups: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	b.authorize(req)
	type opened struct {
		r   *bufio.Reader
		err error
	}
	done := make(chan opened, 1)
	go func() {
		resp, err := b.hc.Do(req)
		if err != nil {
			done <- opened{err: fmt.Errorf("remote: wake-ups: %w", err)}
			return
		}
		if resp.StatusCode != http.StatusOK {
			raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			var eb api.ErrorBody
			if json.Unmarshal(raw, &eb) == nil && eb.Error.Code != "" {
				done <- opened{err: wrapErr(eb.Error.Err())}
				return
			}
			done <- opened{err: fmt.Errorf("remote: wake-ups: HTTP %d: %.200s", resp.StatusCode, raw)}
			return
		}
		r := bufio.NewReader(resp.Body)
		ev, err := nextEvent(r)
		if err == nil && ev != "ready" {
			err = fmt.Errorf("first event %q, want ready", ev)
		}
		if err != nil {
			resp.Body.Close()
			done <- opened{err: fmt.Errorf("remote: wake-ups: %w", err)}
			return
		}
		done <- opened{r: r}
	}()
	select {
	case o := <-done:
		return o.r, o.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readStream signals on every "wake" event until sctx ends, reopening the
// stream (with a signal) when it breaks: after 100 ms, then doubling up to
// 5 s. It logs the first failed reopen of a break and the recovery, not
// every attempt.
func (b *httpBackend) readStream(sctx context.Context, r *bufio.Reader, q url.Values, signal func()) {
	backoff := 100 * time.Millisecond
	failed := false
	for sctx.Err() == nil {
		for r != nil {
			ev, err := nextEvent(r)
			if err != nil {
				r = nil
				break
			}
			if ev == "wake" {
				signal()
			}
			backoff = 100 * time.Millisecond
		}
		select {
		case <-sctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
		nr, err := b.openStream(sctx, sctx, q)
		if err != nil {
			if sctx.Err() == nil && !failed {
				b.log.Warn("kyu remote: wake-up stream broke and does not reopen yet; retrying", "error", err)
				failed = true
			}
			continue
		}
		if failed {
			b.log.Info("kyu remote: wake-up stream reopened")
			failed = false
		}
		r = nr
		signal()
	}
}

// nextEvent reads one server-sent event and returns its name ("message"
// when unnamed); comments are skipped.
func nextEvent(r *bufio.Reader) (string, error) {
	name, any := "", false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return "", io.ErrUnexpectedEOF
			}
			return "", err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if any {
				if name == "" {
					name = "message"
				}
				return name, nil
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			name, any = strings.TrimSpace(strings.TrimPrefix(line, "event:")), true
		default:
			any = true
		}
	}
}
