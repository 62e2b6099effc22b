package cli

import (
	"runtime"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, _, err := run(t, args...)
		if err != nil {
			t.Fatalf("kyu %v: %v", args, err)
		}
		if want := "kyu " + version + " " + runtime.Version(); !strings.HasPrefix(out, want) {
			t.Fatalf("kyu %v = %q, want it to start with %q", args, out, want)
		}
	}
}
