//go:build !linux || !cgo

package pebble

// canTrimC is false: without cgo Pebble's memory is in the Go heap, and
// other systems' allocators are left as they are.
const canTrimC = false

func trimC() {}
