package cli

import (
	"strings"
	"testing"
)

// TestHelpNamesOnlyAvailableStores keeps the help from advertising a store
// this build cannot open: MySQL is recognised by backendurl but refused.
func TestHelpNamesOnlyAvailableStores(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"server", "--help"}, {"bench", "--help"}} {
		out, _, err := run(t, args...)
		if err != nil {
			t.Fatalf("kyu %v: %v", args, err)
		}
		if strings.Contains(strings.ToLower(out), "mysql") {
			t.Fatalf("kyu %v names MySQL, which this build cannot open:\n%s", args, out)
		}
		for _, store := range []string{"redis://", "postgres://", "http"} {
			if args[0] == "--help" && !strings.Contains(out, store) {
				t.Fatalf("kyu --help does not name %s:\n%s", store, out)
			}
		}
	}
}
