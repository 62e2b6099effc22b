//go:build unix

package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kyuhq/kyu"
)

// maxHTTPResult bounds the response body kept as a job's result.
const maxHTTPResult = 1 << 20

// httpRunner runs the jobs of one type by POSTing each to a URL.
type httpRunner struct {
	cfg    HandlerConfig
	client *http.Client
}

// newHTTPRunner prepares a handler; its client keeps up to concurrency
// connections to the URL's host alive.
func newHTTPRunner(h HandlerConfig, concurrency int) *httpRunner {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = concurrency
	return &httpRunner{cfg: h, client: &http.Client{Transport: tr}}
}

// run POSTs the job object (as an exec child reads it on stdin) to the
// URL: a 2xx answer completes the job, its body the result; 429 or 503
// with Retry-After retries the job after that delay; any other answer,
// or no answer, follows the retry policy. A shutdown's interrupt ends
// the request, and the job is handed back.
func (r *httpRunner) run(ctx context.Context, job *kyu.Job, stop stopSignals) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	requestDone := make(chan struct{})
	defer close(requestDone)
	go func() {
		select {
		case <-stop.interrupt:
		case <-stop.kill:
		case <-requestDone:
			return
		}
		cancel(errInterrupted)
	}()
	if r.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.cfg.Timeout)
		defer cancel()
	}
	body, err := encodeJob(job)
	if err != nil {
		return fmt.Errorf("encode job: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return kyu.Permanent(fmt.Errorf("handler url: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Kyu-Job-Id", job.ID)
	req.Header.Set("Kyu-Job-Type", job.Type)
	req.Header.Set("Kyu-Attempt", strconv.Itoa(job.Attempt))
	resp, err := r.client.Do(req)
	if err != nil {
		if errors.Is(context.Cause(ctx), errInterrupted) {
			return errInterrupted
		}
		if cause := context.Cause(ctx); errors.Is(cause, kyu.ErrCancelled) || errors.Is(cause, kyu.ErrLeaseLost) {
			return fmt.Errorf("POST %s: %w", r.cfg.URL, cause)
		}
		return r.fail(fmt.Errorf("POST %s: %w", r.cfg.URL, err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPResult+1))
	if err != nil {
		return r.fail(fmt.Errorf("POST %s: reading the answer: %w", r.cfg.URL, err))
	}
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		if len(b) > maxHTTPResult {
			return r.fail(fmt.Errorf("POST %s: answer over %d bytes", r.cfg.URL, maxHTTPResult))
		}
		if len(bytes.TrimSpace(b)) > 0 {
			var buf bytes.Buffer
			if json.Compact(&buf, b) == nil {
				b = buf.Bytes()
			}
			if err := job.SetResult(b); err != nil {
				return err
			}
		}
		return nil
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		err := httpError(resp, b)
		if d, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return kyu.RetryAfter(d, err)
		}
		return r.fail(err)
	default:
		return r.fail(httpError(resp, b))
	}
}

// fail is a failed attempt under the retry policy.
func (r *httpRunner) fail(err error) error {
	if r.cfg.Retry.NoRetry {
		return kyu.Permanent(err)
	}
	return err
}

// httpError is "HTTP 500 Internal Server Error: first line of the body".
func httpError(resp *http.Response, body []byte) error {
	msg := "HTTP " + resp.Status
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	if line != "" {
		msg += ": " + clip(strings.ToValidUTF8(line, "\uFFFD"), 200)
	}
	return errors.New(msg)
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
