// Package api holds the JSON shapes of the kyu REST API (/api/v1) and their
// conversions to and from the storage contract in package backend. The
// server and backend/remote share it, so both ends of the wire agree by
// construction; it imports nothing beyond the standard library and backend.
package api

// NowHeader carries the caller's clock (RFC 3339 with nanoseconds). A
// server honours it only when it runs with a test clock (server.Config's
// Clock); in production the server's own clock is the caller's clock and
// the header is ignored.
const NowHeader = "Kyu-Now"

// IdempotencyHeader makes a retried enqueue return the first answer.
const IdempotencyHeader = "Idempotency-Key"
