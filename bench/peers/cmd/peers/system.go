package main

import (
	"context"
	"errors"
	"strings"
)

// queueName is the queue every system uses.
const queueName = "peers"

// errNoBatch reports a system without a call that enqueues many jobs at
// once; its batch figure is left out.
var errNoBatch = errors.New("no batch enqueue in this system's API")

// A system is one job system on one store, driven only through its public
// API. The measurements in measure.go use nothing else.
type system interface {
	// reset removes everything the system stored (its keys, schema or
	// directory) and opens it anew, empty.
	reset(ctx context.Context) error
	// close releases the system.
	close() error
	// enqueueBatch adds one job per payload in one call, or returns
	// errNoBatch.
	enqueueBatch(ctx context.Context, payloads [][]byte) error
	// enqueueOne adds one job.
	enqueueOne(ctx context.Context, payload []byte) error
	// counts reports how many jobs the store holds waiting and completed.
	counts(ctx context.Context) (pending, completed int64, err error)
	// work starts conc handlers; each calls ran once per job it runs and
	// then returns success. stop shuts them down gracefully.
	work(ctx context.Context, conc int, ran func()) (stop func(context.Context) error, err error)
}

// payload returns a JSON document of exactly n bytes ({"p":"xx…"}), the
// job payload of every system.
func payload(n int) []byte {
	const frame = len(`{"p":""}`)
	if n < frame {
		n = frame
	}
	return []byte(`{"p":"` + strings.Repeat("x", n-frame) + `"}`)
}
