package pebble

import (
	"context"

	"github.com/kyuhq/kyu/backend"
)

// Import writes jobs with their history (see backend.Importer), all the
// new ones in one commit. A job whose id exists is compared afterwards,
// from durable state, as Get reads it.
func (s *store) Import(ctx context.Context, p backend.ImportParams) (backend.ImportResult, error) {
	res := backend.ImportResult{Items: make([]backend.ImportItem, len(p.Jobs))}
	existing, err := s.importNew(ctx, p, res.Items)
	if err != nil {
		return backend.ImportResult{}, err
	}
	for _, i := range existing {
		j := p.Jobs[i]
		old, err := s.Get(ctx, backend.GetParams{ID: j.ID})
		if err != nil {
			return backend.ImportResult{}, err
		}
		if f := backend.SameJob(old, j); f != "" {
			res.Items[i] = backend.ImportItem{Outcome: backend.ImportConflict, Reason: backend.ImportDiffers(j.ID, f)}
		} else {
			res.Items[i] = backend.ImportItem{Outcome: backend.ImportSame}
		}
	}
	return res, nil
}

// importNew writes the jobs whose id is free, fills their items, and
// returns the positions of the jobs whose id exists.
func (s *store) importNew(ctx context.Context, p backend.ImportParams, items []backend.ImportItem) ([]int, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	if err := s.lockState(); err != nil {
		return nil, err
	}
	var existing []int
	mark := s.writes
	for i, j := range p.Jobs {
		id, _ := parseID(j.ID)
		old, _, err := s.load(id)
		if err != nil {
			s.unlock()
			return nil, err
		}
		if old != nil {
			existing = append(existing, i)
			continue
		}
		if j.JID != "" {
			hid, h, err := s.jidHolder(j.JID)
			if err != nil {
				s.unlock()
				return nil, err
			}
			if h != nil {
				items[i] = backend.ImportItem{Outcome: backend.ImportConflict, HolderID: hid.String(),
					Reason: backend.ImportJIDHeld(j.ID, j.JID, hid.String())}
				continue
			}
		}
		var name string
		if backend.HoldsKey(j, p.Now) {
			name = uniqueName(j.Queue, j.UniqueKey)
			if u, ok := s.idx.uniques[name]; ok && (u.until == 0 || timeCode(p.Now) < u.until) {
				h := u.holder.String()
				items[i] = backend.ImportItem{Outcome: backend.ImportConflict, HolderID: h,
					Reason: backend.ImportKeyHeld(j.ID, j.Queue, j.UniqueKey, h)}
				continue
			}
		}
		rec := j.Clone()
		payload, logs := rec.Payload, rec.Logs
		rec.Payload, rec.Logs = nil, nil
		sd := side{payload: payload != nil, payloadLen: len(payload), logs: len(logs)}
		g := s.group()
		if sd.payload {
			_ = g.batch.Set(payloadKey(id), payload, nil)
			g.importsPayloads = true
		}
		for n, l := range logs {
			_ = g.batch.Set(logKey(id, n), encodeLogLine(l.At, l.Line), nil)
		}
		s.put(id, rec, sd)
		if rec.JID != "" {
			s.putJID(rec.JID, id)
		}
		s.idx.index(id, rec)
		s.putRetention(id, rec)
		s.idx.track(rec.Queue, id, "", rec.State)
		s.idx.watchDeadline(id, rec)
		if name != "" {
			u := uniqueValue{holder: id, state: rec.State}
			if rec.UniqueFor > 0 {
				u.until = timeCode(rec.CreatedAt.Add(rec.UniqueFor))
				s.idx.uniqueExpiry.push(uniqueExpiry{until: u.until, name: name})
			}
			s.putUnique(name, u)
		}
		if rec.State == backend.StatePending {
			s.wake(rec.Queue)
		}
		items[i] = backend.ImportItem{Outcome: backend.ImportCreated}
	}
	g := s.groupSince(mark)
	s.unlock()
	return existing, wait(g)
}
