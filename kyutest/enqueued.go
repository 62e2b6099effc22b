package kyutest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

// MaxScan is how many jobs matching Want's Type, Queue and State the
// Require functions read at most; a store holding more fails the test,
// which then needs a narrower Want (or a store of its own).
const MaxScan = 10_000

// Want describes the jobs an assertion looks for. Empty fields match
// every job.
type Want struct {
	Type  string
	Queue string
	// State, when set, matches only jobs in that state; by default a job
	// matches whatever became of it since it was enqueued.
	State kyu.State
	// Payload, when set, must accept the job's payload.
	Payload func(payload []byte) bool
}

// filters describes w's filters for a message: "" without any, else
// ` with type "x", queue "y"`.
func (w Want) filters() string {
	var parts []string
	if w.Type != "" {
		parts = append(parts, fmt.Sprintf("type %q", w.Type))
	}
	if w.Queue != "" {
		parts = append(parts, fmt.Sprintf("queue %q", w.Queue))
	}
	if w.State != "" {
		parts = append(parts, fmt.Sprintf("state %s", w.State))
	}
	if w.Payload != nil {
		parts = append(parts, "a payload the predicate accepts")
	}
	if len(parts) == 0 {
		return ""
	}
	return " with " + strings.Join(parts, ", ")
}

// FindEnqueued returns the jobs of store that want matches, oldest first,
// each with its payload. It reads at most MaxScan jobs that match want's
// Type, Queue and State, and returns an error beyond.
func FindEnqueued(ctx context.Context, store backend.Backend, want Want) ([]*kyu.Job, error) {
	c := kyu.NewClient(store, kyu.ClientConfig{})
	opts := kyu.ListOptions{Queue: want.Queue, Type: want.Type, State: want.State, Limit: backend.MaxListLimit}
	var found []*kyu.Job
	scanned := 0
	for {
		page, err := c.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("kyutest: %w", err)
		}
		for _, listed := range page.Jobs {
			if scanned++; scanned > MaxScan {
				return nil, fmt.Errorf("kyutest: more than %d jobs to look through for jobs%s", MaxScan, want.filters())
			}
			// A listing carries no payload: read the job.
			j, err := c.Get(ctx, listed.ID)
			if errors.Is(err, kyu.ErrNotFound) {
				continue // deleted since it was listed
			}
			if err != nil {
				return nil, fmt.Errorf("kyutest: %w", err)
			}
			if want.Payload == nil || want.Payload(j.Payload) {
				found = append(found, j)
			}
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	return found, nil
}

// RequireEnqueued fails the test unless store holds a job that want
// matches, and returns the oldest such job. The failure lists a few jobs
// the store does hold.
func RequireEnqueued(t testing.TB, store backend.Backend, want Want) *kyu.Job {
	t.Helper()
	found, err := FindEnqueued(t.Context(), store, want)
	if err != nil {
		t.Fatalf("kyutest.RequireEnqueued: %v", err)
	}
	if len(found) == 0 {
		t.Fatalf("kyutest.RequireEnqueued: no job%s was enqueued%s", want.filters(), held(t.Context(), store))
	}
	return found[0]
}

// RequireEnqueuedN fails the test unless store holds exactly n jobs that
// want matches, and returns them, oldest first.
func RequireEnqueuedN(t testing.TB, store backend.Backend, want Want, n int) []*kyu.Job {
	t.Helper()
	found, err := FindEnqueued(t.Context(), store, want)
	if err != nil {
		t.Fatalf("kyutest.RequireEnqueuedN: %v", err)
	}
	if len(found) != n {
		t.Fatalf("kyutest.RequireEnqueuedN: %d jobs%s were enqueued; want %d%s", len(found), want.filters(), n, held(t.Context(), store))
	}
	return found
}

// RequireNotEnqueued fails the test when store holds a job that want
// matches.
func RequireNotEnqueued(t testing.TB, store backend.Backend, want Want) {
	t.Helper()
	found, err := FindEnqueued(t.Context(), store, want)
	if err != nil {
		t.Fatalf("kyutest.RequireNotEnqueued: %v", err)
	}
	if len(found) > 0 {
		t.Fatalf("kyutest.RequireNotEnqueued: %d jobs%s were enqueued; want none. The first: %s", len(found), want.filters(), describe(found[0]))
	}
}

// heldShown is how many of the store's jobs a failure lists.
const heldShown = 5

// held describes the first few jobs of store for a failure message.
func held(ctx context.Context, store backend.Backend) string {
	page, err := kyu.NewClient(store, kyu.ClientConfig{}).List(ctx, kyu.ListOptions{Limit: heldShown + 1})
	switch {
	case err != nil:
		return fmt.Sprintf(" (listing the store's jobs: %v)", err)
	case len(page.Jobs) == 0:
		return "; the store holds no job"
	}
	var b strings.Builder
	b.WriteString("; the store holds:")
	for i, j := range page.Jobs {
		if i == heldShown {
			b.WriteString("\n\t…")
			break
		}
		b.WriteString("\n\t" + describe(j))
	}
	return b.String()
}

// describe names a job for a failure message.
func describe(j *kyu.Job) string {
	s := fmt.Sprintf("%s: type %q, queue %q, %s", j.ID, j.Type, j.Queue, j.State)
	if j.Payload != nil {
		p := string(j.Payload)
		if len(p) > 80 {
			p = p[:80] + "…"
		}
		s += fmt.Sprintf(", payload %q", p)
	}
	return s
}
