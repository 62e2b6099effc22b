package cli

import (
	"strings"
	"testing"
)

// TestHelpNamesTheStores keeps the help naming every store by its URL.
func TestHelpNamesTheStores(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"server", "--help"}, {"bench", "--help"}} {
		out, _, err := run(t, args...)
		if err != nil {
			t.Fatalf("kyu %v: %v", args, err)
		}
		for _, store := range []string{"redis://", "postgres://", "mysql://", "http"} {
			if args[0] == "--help" && !strings.Contains(out, store) {
				t.Fatalf("kyu --help does not name %s:\n%s", store, out)
			}
		}
	}
}
