package backend

import (
	"fmt"

	"github.com/google/uuid"
)

// NewID returns a new job id: a UUIDv7 in its text form, so ids sort by
// creation time. Stores may make ids their own way, as long as they are
// unique; the conformance suite uses NewID for ids that were never enqueued.
func NewID() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("kyu: new job id: %w", err)
	}
	return id.String(), nil
}
