package pebble

import (
	"sync"
	"sync/atomic"
	"time"
)

// payloadReaderAge is how long the payload reader keeps one iterator,
// used or idle: an iterator holds on to the memtables and tables it
// reads, which Pebble cannot free or delete meanwhile. At tens of
// thousands of jobs a second a fresh one is still opened for hundreds of
// jobs, not for every claim.
const payloadReaderAge = 10 * time.Millisecond

// payloadReader reads the payloads of claimed jobs (claimResult) through
// one iterator that successive claims share, instead of each opening its
// own and seeking it through every level: claims take jobs in id order,
// so a claim's first payload, too, is mostly a step from the last one the
// previous claim read.
//
// An iterator sees the payloads committed when it was opened. Payloads
// are written once, with ids never used before, so one that misses is
// read again through a fresh iterator; only Import writes a payload under
// an id a job may have had before (a job deleted and then imported), and
// the committer counts such commits in imports before their writers
// (and so any claim of their jobs) see them durable: an iterator opened
// before the last one is not used again.
type payloadReader struct {
	mu      sync.Mutex
	r       pointReader
	opened  time.Time
	imports uint64 // the count of imports when the iterator was opened
	// expiry closes an idle iterator once it is maxAge old.
	expiry *time.Timer
	// maxAge is payloadReaderAge, or what a test sets before the first
	// read.
	maxAge time.Duration
	// importsDone counts the commits that imported payloads.
	importsDone atomic.Uint64
}

// read returns the payload of job id, or nil when it has none; mu must be
// held.
func (p *payloadReader) read(s *store, id jobID) ([]byte, error) {
	if p.r.it != nil && (time.Since(p.opened) > p.maxAge || p.importsDone.Load() != p.imports) {
		p.closeIter()
	}
	for fresh := p.r.it == nil; ; fresh = true {
		if p.r.it == nil {
			p.imports = p.importsDone.Load()
			p.opened = time.Now()
			if p.expiry == nil {
				p.expiry = time.AfterFunc(p.maxAge, p.expire)
			} else {
				p.expiry.Reset(p.maxAge)
			}
		}
		v, err := s.readPayloadKey(onwardReader{&p.r}, p.r.idKey(id), id)
		if v != nil || err != nil || fresh {
			if err != nil {
				p.closeIter()
			}
			return v, err
		}
		p.closeIter() // committed after the iterator was opened
	}
}

// expire closes the iterator once it is maxAge old, and looks
// again then when it is younger.
func (p *payloadReader) expire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.r.it == nil {
		return
	}
	if age := time.Since(p.opened); age < p.maxAge {
		p.expiry.Reset(p.maxAge - age)
		return
	}
	p.closeIter()
}

// stop closes the iterator for good (Close).
func (p *payloadReader) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.expiry != nil {
		p.expiry.Stop()
	}
	p.closeIter()
}

// closeIter closes the iterator, if open; mu must be held.
func (p *payloadReader) closeIter() {
	_ = p.r.Close()
}
