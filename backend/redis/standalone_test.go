package redis

import (
	"strings"
	"testing"
)

// TestStandaloneScript: the lone enqueue's script ("enqueue lean") goes
// without common.lua: its KEYS are its own keys in their order, with no
// table of the queue's key positions, and its function starts no run
// (reset), while a script with common.lua does.
func TestStandaloneScript(t *testing.T) {
	t.Parallel()
	scs, err := loadScripts()
	if err != nil {
		t.Fatal(err)
	}
	lean := scs.enqueueLean
	if !lean.standalone || strings.Contains(lean.src(), "local function reset") || strings.Contains(lean.src(), "nil") {
		t.Fatalf("enqueue lean's source has common.lua or a keys table:\n%s", lean.src())
	}
	for i, name := range lean.keys {
		k := "KEYS[" + string(rune('1'+i)) + "]"
		if !strings.Contains(lean.body, k) {
			t.Errorf("enqueue lean does not name key %s (%s) as %s", name, "KEY_"+name, k)
		}
	}
	if strings.Contains(lean.body, "KEYS[4]") {
		t.Error("enqueue lean names a key past its own three")
	}
	head := func(sc *script) string {
		fn := scs.lib.fn[sc]
		_, rest, ok := strings.Cut(scs.lib.src, "redis.register_function('"+fn+"', function(keys, args)\n")
		if !ok {
			t.Fatalf("no function %s in the library", fn)
		}
		return strings.SplitN(rest, "\n", 3)[0] + "\n" + strings.SplitN(rest, "\n", 3)[1]
	}
	if h := head(lean); h != "KEYS, ARGV = keys, args\n"+strings.SplitN(lean.body, "\n", 2)[0] {
		t.Errorf("enqueue lean's function begins\n%s\nwant its keys as passed and no reset", h)
	}
	if h := head(scs.claim); !strings.HasSuffix(h, "\nreset()") {
		t.Errorf("claim's function begins\n%s\nwant a reset", h)
	}
}
