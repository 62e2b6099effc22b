package cli

import (
	"fmt"
	"math"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
)

// memoryLimitEnv names the environment variable that gives `kyu server`
// its memory limit when --memory-limit is not given.
const memoryLimitEnv = "KYU_MEMORY_LIMIT"

// defaultMemoryLimit is the soft limit `kyu server` gives Go's heap when
// neither --memory-limit, KYU_MEMORY_LIMIT nor GOMEMLIMIT sets one: the
// garbage collector works harder as the heap nears it, instead of letting
// it grow to twice what is live. It is counted above the heap that is live
// once the store is open (see aboveLiveHeap). It is soft: a heap that
// needs more gets more, at the cost of more collection.
const defaultMemoryLimit = 192 << 20

// aboveLiveHeap returns base plus the Go heap that is live now, after a
// collection. The default limit is counted from what the opened store
// holds (the embedded store keeps its indexes in the heap, tens of
// megabytes per million jobs), so a large store does not start with its
// heap at the limit and the collector running without pause.
func aboveLiveHeap(base int64) int64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return base
	}
	return base + int64(sample[0].Value.Uint64())
}

// memoryLimit resolves the soft memory limit of `kyu server`: --memory-limit
// when given (flagSet), else KYU_MEMORY_LIMIT, else none to set when
// GOMEMLIMIT is set (the runtime has applied it), else defaultMemoryLimit.
// It returns the limit in bytes (math.MaxInt64 for "off": no limit), where
// it came from, and set=false when the runtime's own limit stays.
func memoryLimit(flag string, flagSet bool, getenv func(string) string) (limit int64, from string, set bool, err error) {
	v, from := flag, "--memory-limit"
	switch {
	case flagSet:
	case getenv(memoryLimitEnv) != "":
		v, from = getenv(memoryLimitEnv), memoryLimitEnv
	case getenv("GOMEMLIMIT") != "":
		return 0, "GOMEMLIMIT", false, nil
	default:
		return defaultMemoryLimit, "default", true, nil
	}
	limit, err = parseSize(v)
	if err != nil {
		return 0, from, false, fmt.Errorf("server: %s: %w", from, err)
	}
	return limit, from, true, nil
}

// parseSize reads a size in bytes as GOMEMLIMIT writes it: a whole number
// with an optional unit (B, KiB, MiB, GiB, TiB), or "off" (math.MaxInt64).
// Zero is refused: a limit of nothing would collect garbage without end.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "off" {
		return math.MaxInt64, nil
	}
	units := []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}
	shift := uint(0)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, shift = rest, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("want a positive size such as 256MiB or 1GiB, or off, not %q", s)
	}
	return n << shift, nil
}
