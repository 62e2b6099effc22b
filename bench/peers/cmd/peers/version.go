package main

import "runtime/debug"

// moduleVersion returns the version of the module at path that this
// binary was built with, or "?".
func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "?"
	}
	for _, d := range info.Deps {
		if d.Path == path {
			return d.Version
		}
	}
	return "?"
}
