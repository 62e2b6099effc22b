package benchmark

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncCall names the call dataSync makes.
const syncCall = "fdatasync"

// dataSync makes f's written data durable, and the metadata needed to
// read it back (its size), as the embedded store's log syncs do.
func dataSync(f *os.File) error {
	return os.NewSyscallError("fdatasync", unix.Fdatasync(int(f.Fd())))
}
