//go:build !unix

package pebble

// minorFaults is 0 where the system does not count page faults.
func minorFaults() int64 { return 0 }
