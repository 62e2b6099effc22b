package pebble

import (
	"context"

	"github.com/kyuhq/kyu/backend"
)

// Enqueue writes new jobs atomically, in one commit. An item whose JID or
// unique key is held (the JID checked first) reports Duplicate with the
// holder's id and state.
func (s *store) Enqueue(ctx context.Context, p backend.EnqueueParams) (backend.EnqueueResult, error) {
	// Checked prepared p (backend.EnqueueParams.Prepare): defaults filled
	// in its own copy of the items, every time within the range a
	// timeCode holds.
	if err := s.begin(ctx); err != nil {
		return backend.EnqueueResult{}, err
	}
	defer s.end()

	// Ids are UUIDv7, as backend.NewID makes them, without the round trip
	// through text.
	ids := make([]jobID, len(p.Jobs))
	if err := s.ids.fill(ids); err != nil {
		return backend.EnqueueResult{}, err
	}
	res := backend.EnqueueResult{Jobs: make([]backend.EnqueuedJob, len(p.Jobs))}
	now := p.Now
	nowCode := timeCode(now)

	if err := s.lockState(); err != nil {
		return backend.EnqueueResult{}, err
	}
	var g, holder *commitGroup
	// The payloads of a call of several jobs are written after its
	// records (see writePayloads); payloads[i] is job i's.
	var payloads [][]byte
	if len(p.Jobs) > 1 {
		payloads = make([][]byte, len(p.Jobs))
	}
	for i := range p.Jobs {
		nj := &p.Jobs[i]
		id := ids[i]
		if nj.JID != "" {
			hid, h, err := s.jidHolder(nj.JID)
			if err != nil {
				writePayloads(g, ids, payloads)
				s.unlock()
				return backend.EnqueueResult{}, err
			}
			if h != nil {
				res.Jobs[i] = backend.EnqueuedJob{ID: hid.String(), State: h.State, Duplicate: true}
				if e, ok := s.dirty[hid]; ok {
					holder = e.group
				}
				continue
			}
		}
		var name string
		if nj.UniqueKey != "" {
			name = uniqueName(nj.Queue, nj.UniqueKey)
			if u, ok := s.idx.uniques[name]; ok && (u.until == 0 || nowCode < u.until) {
				res.Jobs[i] = backend.EnqueuedJob{ID: u.holder.String(), State: u.state, Duplicate: true}
				// Answer only once the holder is durable.
				if e, ok := s.dirty[u.holder]; ok {
					holder = e.group
				}
				continue
			}
		}
		// The payload goes to its own key, written once; the record
		// never carries it.
		payload := nj.Payload
		nj.Payload = nil
		j := nj.Record(id.String(), now)
		sd := side{payload: payload != nil, payloadLen: len(payload)}
		g = s.group()
		if sd.payload {
			if payloads != nil {
				payloads[i] = payload
			} else {
				setPayload(g, id, payload)
			}
		}
		s.put(id, j, sd)
		if j.JID != "" {
			s.putJID(j.JID, id)
		}
		s.idx.index(id, j)
		s.idx.track(j.Queue, id, "", j.State)
		s.idx.watchDeadline(id, j)
		if name != "" {
			u := uniqueValue{holder: id, state: j.State}
			if nj.UniqueFor > 0 {
				u.until = timeCode(now.Add(nj.UniqueFor))
				s.idx.uniqueExpiry.push(uniqueExpiry{until: u.until, name: name})
			}
			s.putUnique(name, u)
		}
		if j.State == backend.StatePending {
			s.noteEnqueued(id, payload)
			s.wake(j.Queue)
		}
		res.Jobs[i] = backend.EnqueuedJob{ID: j.ID, State: j.State}
	}
	writePayloads(g, ids, payloads)
	if g == nil && holder != nil {
		// Groups commit in order: the pending one, if any, is the last.
		g = holder
		if s.pending != nil {
			g = s.pending
		}
	}
	if err := s.unlockWait(g); err != nil {
		return backend.EnqueueResult{}, err
	}
	return res, nil
}

// writePayloads writes into g the payloads of the jobs of ids that have
// one in payloads, after the loop of Enqueue has written their records.
// Pebble inserts a batch into its memtable in the batch's order, before
// the commit's log write can start (the log writer waits for the
// committing goroutine's processor), and each key is found from the
// previous one: keys in order are found close by, while a record and a
// payload in turn, job after job, alternate between two distant parts of
// the key space and each insert searches from the top.
func writePayloads(g *commitGroup, ids []jobID, payloads [][]byte) {
	for i, p := range payloads {
		if p != nil {
			setPayload(g, ids[i], p)
		}
	}
}

// setPayload writes job id's payload into g.
func setPayload(g *commitGroup, id jobID, payload []byte) {
	var k [17]byte
	k[0] = prefixPayload
	copy(k[1:], id[:])
	_ = g.batch.Set(k[:], payload, nil)
}
