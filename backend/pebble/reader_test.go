package pebble

import (
	"errors"
	"testing"

	cpebble "github.com/cockroachdb/pebble/v2"
)

// TestPointReaderOnward reads keys with getOnward in every order it may
// meet them (next, further on, again, back, missing) and mixed with Get,
// and checks each against the stored value.
func TestPointReaderOnward(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	key := func(n byte) []byte { return []byte{prefixPayload, n} }
	for n := byte(1); n <= 9; n++ {
		if err := s.db.Set(key(n), []byte{'v', n}, cpebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Delete(key(5), cpebble.Sync); err != nil {
		t.Fatal(err)
	}
	r := pointReader{db: s.db, prefix: prefixPayload}
	defer r.Close()
	for _, step := range []struct {
		n      byte
		onward bool
	}{
		{1, true}, {2, true}, {3, true}, {3, true}, {7, true}, {8, false},
		{9, true}, {2, true}, {4, true}, {5, true}, {6, true}, {5, false},
		{6, true}, {0, true}, {1, true},
	} {
		get, how := r.Get, "Get"
		if step.onward {
			get, how = r.getOnward, "getOnward"
		}
		v, _, err := get(key(step.n))
		if step.n == 0 || step.n == 5 {
			if !errors.Is(err, cpebble.ErrNotFound) {
				t.Fatalf("%s(%d) = %q, %v; want ErrNotFound", how, step.n, v, err)
			}
			continue
		}
		if err != nil || len(v) != 2 || v[1] != step.n {
			t.Fatalf("%s(%d) = %q, %v; want v%d", how, step.n, v, err, step.n)
		}
	}
}
