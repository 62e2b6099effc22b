package backend

import "github.com/google/uuid"

// NewID returns a new job id: a UUIDv7, so ids sort by creation time.
func NewID() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	return id.String(), nil
}
