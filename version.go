package kyu

import "runtime/debug"

// modulePath is kyu's module path, to find its version in build information.
const modulePath = "github.com/kyuhq/kyu"

// Version reports the version of kyu built into the running program: the
// module version recorded in its build information (a release tag such as
// v1.2.3, or a pseudo-version) whether kyu is the main module or a
// dependency, or "dev" when none is recorded (a build from a working
// tree). Workers give it in the registry unless WorkerConfig.Version says
// otherwise.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	v := ""
	if bi.Main.Path == modulePath {
		v = bi.Main.Version
	} else {
		for _, m := range bi.Deps {
			if m.Path == modulePath {
				v = m.Version
				if m.Replace != nil && m.Replace.Version != "" {
					v = m.Replace.Version
				}
				break
			}
		}
	}
	if v == "" || v == "(devel)" {
		return "dev"
	}
	return v
}
