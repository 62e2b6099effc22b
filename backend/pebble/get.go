package pebble

import (
	"context"

	"github.com/kyuhq/kyu/backend"
)

// Get returns a job by id or by JID, or backend.ErrNotFound. It returns
// only durable state: when the job has a write in flight, Get waits for it.
func (s *store) Get(ctx context.Context, p backend.GetParams) (*backend.Job, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	if p.JID != "" {
		return s.getJID(p.JID)
	}
	id, ok := parseID(p.ID)
	if !ok {
		return nil, backend.ErrNotFound
	}
	return s.get(id)
}

// getJID reads the job holding a JID. The job the JID key names, as
// writes in flight leave it, is read as get reads it (once its writes are
// durable); it is the holder if it still carries the JID.
func (s *store) getJID(jid string) (*backend.Job, error) {
	if err := s.lockState(); err != nil {
		return nil, err
	}
	id, held, err := s.jidKeyHolder(jid)
	s.unlock()
	switch {
	case err != nil:
		return nil, err
	case !held && id == (jobID{}):
		return nil, backend.ErrNotFound
	}
	// A deletion in flight leaves the id of the job that held the JID:
	// until it is durable, that job is the answer.
	j, err := s.get(id)
	if err != nil {
		return nil, err
	}
	if j.JID != jid {
		return nil, backend.ErrNotFound
	}
	return j, nil
}

// get reads a job by id; the caller has begun an operation.
func (s *store) get(id jobID) (*backend.Job, error) {
	if err := s.lockSettled(id); err != nil {
		return nil, err
	}
	snap := s.db.NewSnapshot()
	s.unlock()
	j, err := s.readJob(snap, id)
	_ = snap.Close()
	return j, err
}

// readJob reads a whole job, payload and log lines included, from r.
func (s *store) readJob(r iterSource, id jobID) (*backend.Job, error) {
	j, sd, err := s.read(r, id)
	switch {
	case err != nil:
		return nil, err
	case j == nil:
		return nil, backend.ErrNotFound
	}
	if j.Payload, j.Logs, err = s.readSide(r, id, sd); err != nil {
		return nil, err
	}
	return j, nil
}

// Delete removes a job that is not active. A unique key held for a
// UniqueFor period keeps holding until the period ends.
func (s *store) Delete(ctx context.Context, p backend.DeleteParams) error {
	id, ok := parseID(p.ID)
	if !ok {
		return backend.ErrNotFound
	}
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	if err := s.lockState(); err != nil {
		return err
	}
	j, sd, err := s.load(id)
	switch {
	case err != nil:
		s.unlock()
		return err
	case j == nil:
		s.unlock()
		return backend.ErrNotFound
	case j.State == backend.StateActive:
		s.unlock()
		return backend.ErrJobActive
	}
	s.deleteJob(id, j, sd, j.State)
	g := s.pending
	s.unlock()
	return wait(g)
}
