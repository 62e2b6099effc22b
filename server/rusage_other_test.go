//go:build !unix

package server_test

import "time"

// processCPU is unknown on this system: benchmarks report no CPU figure.
func processCPU() time.Duration { return 0 }
