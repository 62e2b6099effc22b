package kyu_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend/memory"
)

// TestEnqueueDuplicateSameEverywhere: every enqueue method reports a held
// unique key the same way: no error, Duplicate set, the holder's id and
// state, nothing written.
func TestEnqueueDuplicateSameEverywhere(t *testing.T) {
	t.Parallel()
	c := kyu.NewClient(newStore(t), kyu.ClientConfig{})
	ctx := t.Context()
	opts := kyu.EnqueueOptions{Queue: "dups", UniqueKey: "k"}
	holder := enqueue(t, c, "t", nil, opts)
	calls := map[string]func() (kyu.EnqueueResult, error){
		"Enqueue":     func() (kyu.EnqueueResult, error) { return c.Enqueue(ctx, "t", nil, opts) },
		"EnqueueJSON": func() (kyu.EnqueueResult, error) { return c.EnqueueJSON(ctx, "t", 1, opts) },
		"EnqueueMany": func() (kyu.EnqueueResult, error) {
			res, err := c.EnqueueMany(ctx, []kyu.JobSpec{{Type: "t", EnqueueOptions: opts}})
			if err != nil {
				return kyu.EnqueueResult{}, err
			}
			return res[0], nil
		},
		"EnqueueManyJSON": func() (kyu.EnqueueResult, error) {
			res, err := c.EnqueueManyJSON(ctx, []kyu.JSONJobSpec{{Type: "t", Payload: 1, EnqueueOptions: opts}})
			if err != nil {
				return kyu.EnqueueResult{}, err
			}
			return res[0], nil
		},
	}
	for name, call := range calls {
		res, err := call()
		if err != nil || !res.Duplicate || res.ID != holder || res.State != kyu.StatePending {
			t.Errorf("%s with the key held = %+v, %v; want Duplicate of %s (pending) and no error", name, res, err, holder)
		}
	}
	list, err := c.List(ctx, kyu.ListOptions{Queue: "dups"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Jobs) != 1 {
		t.Errorf("the queue holds %d jobs after the duplicates; want only the holder", len(list.Jobs))
	}
}

// TestEnqueueManyJSON: payloads are encoded as JSON, each job keeps its
// options, and a payload that cannot be encoded fails the whole call.
func TestEnqueueManyJSON(t *testing.T) {
	t.Parallel()
	c := kyu.NewClient(newStore(t), kyu.ClientConfig{})
	ctx := t.Context()
	type email struct {
		To string `json:"to"`
	}
	res, err := c.EnqueueManyJSON(ctx, []kyu.JSONJobSpec{
		{Type: "email.send", Payload: email{To: "ada@example.com"}},
		{Type: "email.send", Payload: email{To: "bob@example.com"}, EnqueueOptions: kyu.EnqueueOptions{Queue: "emails", Priority: 5}},
	})
	if err != nil || len(res) != 2 {
		t.Fatalf("EnqueueManyJSON = %+v, %v", res, err)
	}
	for i, want := range []struct{ payload, queue string }{{`{"to":"ada@example.com"}`, "default"}, {`{"to":"bob@example.com"}`, "emails"}} {
		j, err := c.Get(ctx, res[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if string(j.Payload) != want.payload || j.Queue != want.queue {
			t.Errorf("job %d: payload %s in queue %q; want %s in %q", i, j.Payload, j.Queue, want.payload, want.queue)
		}
	}
	_, err = c.EnqueueManyJSON(ctx, []kyu.JSONJobSpec{{Type: "ok", Payload: 1, EnqueueOptions: kyu.EnqueueOptions{Queue: "bad"}}, {Type: "bad", Payload: make(chan int)}})
	if err == nil || !strings.Contains(err.Error(), "job 1") {
		t.Errorf("EnqueueManyJSON with a channel payload = %v; want an encoding error naming job 1", err)
	}
	if list, err := c.List(ctx, kyu.ListOptions{Queue: "bad"}); err != nil || len(list.Jobs) != 0 {
		t.Errorf("a failed EnqueueManyJSON wrote %d jobs (%v); want none", len(list.Jobs), err)
	}
}

// TestEnqueueTxNotSupported: a store that cannot enqueue in a caller's
// transaction refuses with ErrNotSupported, naming what it would need.
func TestEnqueueTxNotSupported(t *testing.T) {
	t.Parallel()
	c := kyu.NewClient(memory.New(), kyu.ClientConfig{})
	_, err := c.EnqueueTx(t.Context(), struct{}{}, "t", nil, kyu.EnqueueOptions{})
	if !errors.Is(err, kyu.ErrNotSupported) {
		t.Fatalf("EnqueueTx on the in-memory store = %v; want ErrNotSupported", err)
	}
	for _, want := range []string{"*memory.Store", "backend.TxEnqueuer", "pgx.Tx"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("EnqueueTx's error %q does not say %q", err, want)
		}
	}
	if _, err := c.EnqueueManyTx(t.Context(), struct{}{}, []kyu.JobSpec{{Type: "t"}}); !errors.Is(err, kyu.ErrNotSupported) {
		t.Errorf("EnqueueManyTx on the in-memory store = %v; want ErrNotSupported", err)
	}
}
