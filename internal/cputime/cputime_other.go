//go:build !unix

package cputime

import "time"

// Process is the CPU time this process has used; 0 here, where it is not
// read.
func Process() time.Duration { return 0 }
