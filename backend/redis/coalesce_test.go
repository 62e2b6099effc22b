package redis

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestCoalescedEnqueue: single-job enqueues from many goroutines, which
// share script runs, each get their own job (payload, clock), and unique
// keys held by a job of another caller in the same run are reported as
// duplicates of it.
func TestCoalescedEnqueue(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := context.Background()
	const producers, each, keys = 4 * lineCalls, 15, 50 // more producers than calls on their way
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	type out struct {
		res     backend.EnqueuedJob
		payload string
		now     time.Time
		key     string
	}
	outs := make([][]out, producers)
	var wg sync.WaitGroup
	for g := range producers {
		wg.Go(func() {
			for i := range each {
				n := g*each + i
				o := out{payload: fmt.Sprint("job ", n), now: base.Add(time.Duration(n) * time.Millisecond)}
				nj := backend.NewJob{Type: "t", Queue: "q", Payload: []byte(o.payload)}
				if n%3 == 0 {
					o.key = fmt.Sprint("k", n%keys)
					nj.UniqueKey = o.key
				}
				res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: o.now, Jobs: []backend.NewJob{nj}})
				if err != nil {
					t.Error(err)
					return
				}
				o.res = res.Jobs[0]
				outs[g] = append(outs[g], o)
			}
		})
	}
	wg.Wait()
	holders := map[string]string{}
	for _, l := range outs {
		for _, o := range l {
			if o.key != "" && !o.res.Duplicate {
				if h, ok := holders[o.key]; ok {
					t.Fatalf("unique key %s written twice: %s and %s", o.key, h, o.res.ID)
				}
				holders[o.key] = o.res.ID
			}
		}
	}
	for _, l := range outs {
		for _, o := range l {
			if o.res.Duplicate {
				if holders[o.key] != o.res.ID {
					t.Fatalf("duplicate of key %s names %s, the holder is %s", o.key, o.res.ID, holders[o.key])
				}
				continue
			}
			j, err := s.Get(ctx, backend.GetParams{ID: o.res.ID})
			if err != nil {
				t.Fatal(err)
			}
			if string(j.Payload) != o.payload || !j.CreatedAt.Equal(o.now) {
				t.Fatalf("job %s: payload %q created %v, want %q %v", o.res.ID, j.Payload, j.CreatedAt, o.payload, o.now)
			}
		}
	}
}
