package cli

import (
	"testing"
)

// TestErrorMessages checks the exact words of errors a user sees: one
// "kyu: " prefix, no Go internals, the flag or job named.
func TestErrorMessages(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, url string) {
		id := enqueueID(t, url, "email")
		mustKyu(t, url, "jobs", "cancel", id)
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"jobs", "get", "nosuch"}, "kyu: get job nosuch: job not found"},
			{[]string{"jobs", "list", "--limit", "abc"}, `kyu: invalid value "abc" for --limit: must be an integer (see kyu --help)`},
		} {
			_, _, err := kyuCmd(t, url, "", c.args...)
			if err == nil {
				t.Fatalf("kyu %q succeeded; want %q", c.args, c.want)
			}
			if got := Message(err); got != c.want {
				t.Errorf("kyu %q: %q; want %q", c.args, got, c.want)
			}
		}
		// An action on many ids reports each failure on stderr.
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"jobs", "cancel", id}, "kyu: cannot cancel job " + id + ": it is cancelled\n"},
			{[]string{"jobs", "run", id}, "kyu: cannot run job " + id + " now: it is cancelled\n"},
		} {
			_, errOut, err := kyuCmd(t, url, "", c.args...)
			if err == nil || errOut != c.want {
				t.Errorf("kyu %q: stderr %q (error %v); want %q", c.args, errOut, err, c.want)
			}
		}
	})
}

func TestFlagErrorsSayWhatTheValueMustBe(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--jobs", "many"}, `kyu: invalid value "many" for --jobs: must be an integer (see kyu --help)`},
		{[]string{"server", "--insecure=maybe"}, `kyu: invalid value "maybe" for --insecure: must be true or false (see kyu --help)`},
		{[]string{"server", "--body-timeout", "soon"}, `kyu: invalid value "soon" for --body-timeout: must be a duration such as 500ms, 30s or 5m (see kyu --help)`},
	} {
		_, _, err := run(t, c.args...)
		if err == nil {
			t.Fatalf("kyu %q succeeded", c.args)
		}
		if got := Message(err); got != c.want {
			t.Errorf("kyu %q: %q; want %q", c.args, got, c.want)
		}
	}
}
