//go:build !linux

package benchmark

import "os"

// syncCall names the call dataSync makes.
const syncCall = "fsync"

// dataSync makes f's written data durable.
func dataSync(f *os.File) error {
	return f.Sync()
}
