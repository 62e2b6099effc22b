package move_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/internal/move"
)

// TestJIDMoves checks that a job's jid travels: an export's job line
// carries it, an import and a copy keep it (the target finds the job by
// it), and an import into a store where another job holds the jid is a
// conflict naming that job.
func TestJIDMoves(t *testing.T) {
	src := openStore(t, "memory")
	var p backend.EnqueueParams
	p.Now = t0
	for i := range 3 {
		p.Jobs = append(p.Jobs, backend.NewJob{Type: "t", JID: fmt.Sprintf("m-%d", i)})
	}
	res, err := src.Enqueue(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := move.Export(t.Context(), src, &buf, moveOptions()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"jid":"m-1"`) {
		t.Fatalf("the export lacks the jid:\n%s", buf.String())
	}
	for _, kind := range []string{"pebble", "remote"} {
		dst := openStore(t, kind)
		var sum move.Summary
		if kind == "pebble" {
			sum, err = importBytes(t, dst, buf.Bytes())
		} else {
			sum, err = move.Copy(t.Context(), src, dst, moveOptions())
		}
		if err != nil || sum.Created != 3 {
			t.Fatalf("%s: move: %+v, %v; want 3 created", kind, sum, err)
		}
		for i, r := range res.Jobs {
			j, err := dst.Get(t.Context(), backend.GetParams{JID: fmt.Sprintf("m-%d", i)})
			if err != nil || j.ID != r.ID {
				t.Fatalf("%s: Get by jid m-%d = %v, %v; want %s", kind, i, j, err, r.ID)
			}
		}
	}

	dst := openStore(t, "pebble")
	held, err := dst.Enqueue(t.Context(), backend.EnqueueParams{Now: t0, Jobs: []backend.NewJob{{Type: "t", JID: "m-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := importBytes(t, dst, buf.Bytes())
	var ce *move.ConflictError
	if !errors.As(err, &ce) || sum.Created != 2 || sum.Conflicted != 1 || !strings.Contains(ce.First[0].Reason, held.Jobs[0].ID) {
		t.Fatalf("import with a held jid: %+v, %v; want 2 created and a conflict naming %s", sum, err, held.Jobs[0].ID)
	}
}
