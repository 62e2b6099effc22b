package remote_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestJIDShapedLikeAnID checks that Get by JID and Get by id stay apart
// over HTTP when one job's JID is another job's id (the server, asked
// for either without saying which, answers the id first).
func TestJIDShapedLikeAnID(t *testing.T) {
	t.Parallel()
	b := openRemote(t, startServer(t, nil))
	ctx := t.Context()
	now := time.Now()
	enq := func(nj backend.NewJob) string {
		t.Helper()
		nj.Type = "t"
		res, err := b.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{nj}})
		if err != nil || res.Jobs[0].Duplicate {
			t.Fatalf("Enqueue: %+v, %v", res, err)
		}
		return res.Jobs[0].ID
	}
	first := enq(backend.NewJob{JID: "plain"})
	second := enq(backend.NewJob{JID: first})
	if j, err := b.Get(ctx, backend.GetParams{JID: first}); err != nil || j.ID != second {
		t.Fatalf("Get(jid = the first job's id) = %v, %v; want the second job, %s", j, err, second)
	}
	if j, err := b.Get(ctx, backend.GetParams{ID: first}); err != nil || j.ID != first || j.JID != "plain" {
		t.Fatalf("Get(id %s) = %v, %v; want that job, jid plain", first, j, err)
	}
	if _, err := b.Get(ctx, backend.GetParams{ID: "plain"}); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Get(id = a jid) = %v; want ErrNotFound: an id is never looked up as a jid", err)
	}
}
