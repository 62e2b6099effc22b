package server

import "testing"

// TestBatchItems counts the items of batch bodies, nested values and
// commas in strings aside, and stops past the limit.
func TestBatchItems(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]int{
		`[]`: 0, ` [ ] `: 0, `[{}]`: 1, `[{"a":[1,2,3]},{"b":{"c":","}}]`: 2, `["x","y\",z"]`: 2,
		`[1,2,3]`: 3, `[{"t":"\\"},{}]`: 2, `[{},{},{},{},{},{}]`: 4,
	} {
		if got := batchItems([]byte(body), 3); got != want {
			t.Errorf("batchItems(%s, 3) = %d; want %d", body, got, want)
		}
	}
}
