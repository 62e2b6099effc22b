package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestBodyGate checks that a large body, once read, waits at the gate
// while other large bodies hold it, and that small bodies never wait: a
// reader whose request has ended while the gate is full fails with a
// bodyError, and gets through once the holder leaves.
func TestBodyGate(t *testing.T) {
	t.Parallel()
	gate := newBodyGate(3 * largeBody)
	large := strings.Repeat("x", 2*largeBody)
	read := func(ctx context.Context, body string) (*bodyReader, error) {
		br := &bodyReader{body: io.NopCloser(strings.NewReader(body)), ctx: ctx, gate: gate}
		b, err := io.ReadAll(br)
		if err == nil && !bytes.Equal(b, []byte(body)) {
			t.Fatalf("read %d bytes of %d", len(b), len(body))
		}
		return br, err
	}
	first, err := read(t.Context(), large)
	if err != nil || first.held != int64(len(large)) {
		t.Fatalf("first large body: %v, holds %d", err, first.held)
	}
	small, err := read(t.Context(), strings.Repeat("x", largeBody))
	if err != nil || small.held != 0 {
		t.Fatalf("small body: %v, holds %d; want through without holding", err, small.held)
	}
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = read(ended, large)
	var be *bodyError
	if !errors.As(err, &be) || !errors.Is(err, context.Canceled) {
		t.Fatalf("second large body while the gate is full: %v; want a bodyError for the ended request", err)
	}
	first.leave()
	second, err := read(t.Context(), large)
	if err != nil || second.held != int64(len(large)) {
		t.Fatalf("second large body after the first left: %v, holds %d", err, second.held)
	}
	second.leave()
	huge, err := read(t.Context(), large+large)
	if err != nil || huge.held != gate.size {
		t.Fatalf("body over the gate: %v, holds %d; want all %d", err, huge.held, gate.size)
	}
	huge.leave()
}
