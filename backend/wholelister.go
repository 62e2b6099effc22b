package backend

import "context"

// WholeLister is the optional ability of a store to list jobs whole: the
// pages of List, with the filters, order and cursors of List, whose jobs
// carry their payload, result and log lines as Get returns them. It saves
// a Get per listed job when every job is read (kyu export and copy find
// it by type assertion on the store and fall back to List and Get).
type WholeLister interface {
	// ListWhole is List with whole jobs; p is checked as List checks it.
	ListWhole(ctx context.Context, p ListParams) (ListResult, error)
}
