// Package faktory serves the Faktory work protocol (FWP, version 2) over
// a kyu store, so that Faktory's clients in other languages (Ruby, Node,
// Go, Python and more) push and run kyu jobs unchanged.
//
// A Listener accepts TCP connections, greets each one with HI (with a salt
// and an iteration count when a password is set), checks the client's
// HELLO and then answers one command line at a time: PUSH and PUSHB
// enqueue, FETCH claims, ACK completes, FAIL fails with kyu's backoff,
// BEAT keeps a worker's registry entry alive and hands it the operator's
// quiet or stop, END closes. Answers are RESP-framed: +OK, -ERR text, a
// bulk string ($len) or nil ($-1).
//
// A Faktory job maps onto a kyu job field by field (see job.go and
// docs/faktory.md): kyu keeps its own id, and the Faktory jid is the job's
// JID, unique store-wide. The leases FETCH hands out are remembered by jid
// in the Listener, so ACK and FAIL may arrive on any connection; after a
// restart they fall back to the job's current lease in the store.
package faktory
