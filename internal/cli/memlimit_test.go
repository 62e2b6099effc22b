package cli

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestMemoryLimit checks where `kyu server` takes its memory limit from:
// --memory-limit, then KYU_MEMORY_LIMIT, then GOMEMLIMIT (left to the
// runtime), then the default; and the sizes it reads.
func TestMemoryLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		flag    string
		flagSet bool
		env     map[string]string
		want    int64
		from    string
		set     bool
		wantErr bool
	}{
		{name: "default", want: defaultMemoryLimit, from: "default", set: true},
		{name: "GOMEMLIMIT stays", env: map[string]string{"GOMEMLIMIT": "1GiB"}, from: "GOMEMLIMIT"},
		{name: "env", env: map[string]string{memoryLimitEnv: "512MiB", "GOMEMLIMIT": "1GiB"}, want: 512 << 20, from: memoryLimitEnv, set: true},
		{name: "flag", flag: "1GiB", flagSet: true, env: map[string]string{memoryLimitEnv: "512MiB"}, want: 1 << 30, from: "--memory-limit", set: true},
		{name: "bytes", flag: "300000000", flagSet: true, want: 300000000, from: "--memory-limit", set: true},
		{name: "KiB", flag: "64KiB", flagSet: true, want: 64 << 10, from: "--memory-limit", set: true},
		{name: "B", flag: "4096B", flagSet: true, want: 4096, from: "--memory-limit", set: true},
		{name: "off", flag: "off", flagSet: true, want: math.MaxInt64, from: "--memory-limit", set: true},
		{name: "zero", flag: "0", flagSet: true, wantErr: true},
		{name: "negative", flag: "-1MiB", flagSet: true, wantErr: true},
		{name: "MB", flag: "256MB", flagSet: true, wantErr: true},
		{name: "overflow", flag: "9000000TiB", flagSet: true, wantErr: true},
		{name: "bad env", env: map[string]string{memoryLimitEnv: "lots"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, from, set, err := memoryLimit(tc.flag, tc.flagSet, func(k string) string { return tc.env[k] })
			if tc.wantErr {
				if err == nil {
					t.Fatalf("memoryLimit = %d; want an error", got)
				}
				return
			}
			if err != nil || got != tc.want || from != tc.from || set != tc.set {
				t.Fatalf("memoryLimit = %d, %q, %v, %v; want %d, %q, %v", got, from, set, err, tc.want, tc.from, tc.set)
			}
		})
	}
}

// TestServerMemoryLimitFlag checks that `kyu server` refuses a memory
// limit it cannot read as a usage error, before it opens the store.
func TestServerMemoryLimitFlag(t *testing.T) {
	t.Parallel()
	store := filepath.Join(t.TempDir(), "store")
	_, _, err := run(t, "server", "--addr", "127.0.0.1:0", "--backend", "pebble://"+store, "--memory-limit", "lots")
	var usage *UsageError
	if !errors.As(err, &usage) {
		t.Fatalf("--memory-limit lots = %v; want a usage error", err)
	}
	if _, err := os.Stat(store); !os.IsNotExist(err) {
		t.Errorf("the store was created (%v); want the flag refused first", err)
	}
}

// TestDefaultLimitAboveLiveHeap: the default limit is counted above the
// heap that is live, so a store holding much in memory is not started
// with its heap already at the limit.
func TestDefaultLimitAboveLiveHeap(t *testing.T) {
	const held = 64 << 20
	live := make([]byte, held)
	for i := range live {
		live[i] = 1
	}
	got := aboveLiveHeap(defaultMemoryLimit)
	runtime.KeepAlive(live)
	if got < defaultMemoryLimit+held {
		t.Fatalf("aboveLiveHeap = %d MiB with %d MiB live; want at least %d MiB", got>>20, held>>20, (defaultMemoryLimit+held)>>20)
	}
}
