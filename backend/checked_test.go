package backend_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// spy records the calls that reach it; the methods it does not override
// are nil and panic, so a test that reaches one fails loudly.
type spy struct {
	backend.Backend
	enqueued  []backend.EnqueueParams
	completes int
	bound     int // MaxPayload's answer when limited
}

func (s *spy) Enqueue(ctx context.Context, p backend.EnqueueParams) (backend.EnqueueResult, error) {
	s.enqueued = append(s.enqueued, p)
	return backend.EnqueueResult{}, nil
}

func (s *spy) Complete(ctx context.Context, p backend.CompleteParams) (backend.BatchResult, error) {
	s.completes++
	return backend.BatchResult{}, nil
}

// limitedSpy is a spy with a PayloadLimiter.
type limitedSpy struct{ *spy }

func (s limitedSpy) MaxPayload() int { return s.bound }

func TestCheckedRefusesBeforeTheStore(t *testing.T) {
	s := &spy{}
	b := backend.Checked(s)
	ctx := t.Context()
	_, err := b.Enqueue(ctx, backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "t"}}})
	var ve *backend.ValidationError
	if !errors.As(err, &ve) || ve.Field != "now" {
		t.Fatalf("Enqueue without Now: %v; want a *ValidationError on now", err)
	}
	if _, err := b.Complete(ctx, backend.CompleteParams{}); !errors.As(err, &ve) {
		t.Fatalf("Complete without Now: %v; want a *ValidationError", err)
	}
	if len(s.enqueued) != 0 || s.completes != 0 {
		t.Fatalf("refused calls reached the store: %d enqueues, %d completes", len(s.enqueued), s.completes)
	}
	jobs := []backend.NewJob{{Type: "t"}}
	if _, err := b.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if len(s.enqueued) != 1 || s.enqueued[0].Jobs[0].Queue != backend.DefaultQueue {
		t.Fatalf("the store got %+v; want the job with its defaults (queue %q)", s.enqueued, backend.DefaultQueue)
	}
	if jobs[0].Queue != "" {
		t.Fatalf("the caller's job was changed: queue %q", jobs[0].Queue)
	}
}

func TestCheckedOnce(t *testing.T) {
	b := backend.Checked(&spy{})
	if backend.Checked(b) != b {
		t.Fatal("Checked of a checked backend wrapped it again")
	}
}

func TestCheckedPayloadLimiter(t *testing.T) {
	ctx := t.Context()
	big := backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "t", Payload: make([]byte, backend.DefaultMaxPayload+1)}}, Now: time.Now()}
	if _, err := backend.Checked(&spy{}).Enqueue(ctx, big); err == nil {
		t.Fatal("a payload over DefaultMaxPayload passed a store without a PayloadLimiter")
	}
	s := &spy{bound: math.MaxInt}
	if _, err := backend.Checked(limitedSpy{s}).Enqueue(ctx, big); err != nil {
		t.Fatalf("a store whose bound is MaxInt: %v", err)
	}
	small := big
	small.MaxPayload = 10
	if _, err := backend.Checked(limitedSpy{s}).Enqueue(ctx, small); err == nil {
		t.Fatal("the caller's smaller MaxPayload was not applied")
	}
}

// BenchmarkChecked measures what Checked adds to a call on the hot path
// (Complete of one item): the checks and one interface call.
func BenchmarkChecked(b *testing.B) {
	p := backend.CompleteParams{Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: "x", Token: 1}}}, Now: time.Now()}
	for _, c := range []struct {
		name string
		b    backend.Backend
	}{{"Direct", &spy{}}, {"Checked", backend.Checked(&spy{})}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				if _, err := c.b.Complete(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A store's Open hands its users the checked form of its implementation,
// so bad input is refused before the store sees it.
func ExampleChecked() {
	impl := &spy{} // the store's own implementation of backend.Backend
	b := backend.Checked(impl)
	_, err := b.Enqueue(context.Background(), backend.EnqueueParams{
		Jobs: []backend.NewJob{{Type: "mail", Priority: 1 << 20}},
		Now:  time.Now(),
	})
	fmt.Println(err)
	fmt.Println("calls that reached the store:", len(impl.enqueued))
	// Output:
	// kyu: invalid job 0: priority: 1048576 is outside [-100, 100]
	// calls that reached the store: 0
}
