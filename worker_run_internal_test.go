package kyu

import (
	"testing"
	"unsafe"
)

// A run is allocated for every job a worker starts. Larger than 512
// bytes and holding pointers, it carries an 8-byte type header in its
// allocation: with it, it must fit the 704-byte size class (the next are
// 768 and 896). A field added to jobRun must come out of what is left.
func TestRunFitsItsSizeClass(t *testing.T) {
	t.Parallel()
	const header, class = 8, 704
	if n := unsafe.Sizeof(jobRun{}) + header; n > class {
		t.Errorf("a run takes %d bytes with its header, over the %d-byte size class", n, class)
	}
}
