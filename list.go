package kyu

import (
	"context"
	"fmt"

	"github.com/kyuhq/kyu/backend"
)

// ListOrder is the direction of a listing, by id (enqueue order).
type ListOrder = backend.ListOrder

// Listing orders.
const (
	OldestFirst = backend.OldestFirst
	NewestFirst = backend.NewestFirst
)

// ListOptions filter and page a listing; empty filters match every job.
type ListOptions struct {
	Queue string
	State State
	Type  string
	// Tag matches a job that has exactly this tag (case-sensitive).
	Tag string
	// Search matches a job whose id starts with it, whose title contains
	// it (ignoring case), or that has it as a tag.
	Search string
	// Order defaults to OldestFirst.
	Order ListOrder
	// Limit is the page size: default 50, at most 1000.
	Limit int
	// Cursor continues the listing whose page returned it as NextCursor,
	// with the same filters and order; "" starts at the first page.
	Cursor string
}

// JobPage is one page of a listing. NextCursor is "" on the last page.
// Listed jobs carry every field but Payload, Result and Logs (Get has
// them).
type JobPage struct {
	Jobs       []*Job
	NextCursor string
}

// List returns a page of jobs matching opts, in id (enqueue) order. Paging
// from the first page to the last returns every job that matched throughout
// exactly once, whatever is enqueued meanwhile. Bad filters and a cursor
// that was altered, or made for other filters, give a *ValidationError.
func (c *Client) List(ctx context.Context, opts ListOptions) (JobPage, error) {
	res, err := c.b.List(ctx, backend.ListParams{
		Queue: opts.Queue, State: opts.State, Type: opts.Type, Tag: opts.Tag, Search: opts.Search,
		Order: opts.Order, Limit: opts.Limit, Cursor: opts.Cursor,
	})
	if err != nil {
		return JobPage{}, fmt.Errorf("kyu: list jobs: %w", err)
	}
	page := JobPage{Jobs: make([]*Job, len(res.Jobs)), NextCursor: res.NextCursor}
	for i, r := range res.Jobs {
		page.Jobs[i] = jobFromRecord(r)
	}
	return page, nil
}
