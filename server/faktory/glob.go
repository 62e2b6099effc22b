package faktory

// globMatch reports whether s matches pattern, a glob in the syntax
// Faktory's clients send as MUTATE's "regexp" (the pattern syntax of
// Redis's SCAN MATCH): * matches any run of bytes, ? any one byte,
// [abc] [a-z] [^abc] a byte of (or not of) a set, and \ makes the next
// byte literal. A malformed set ([ without ]) matches its bytes as
// written.
func globMatch(pattern, s string) bool {
	// Backtracking over the last star: each star only ever needs to
	// take one more byte when what follows it fails, so this is linear
	// in len(s) times the number of stars at worst.
	p, i := 0, 0
	starP, starI := -1, 0
	for i < len(s) {
		if p < len(pattern) {
			switch c := pattern[p]; c {
			case '*':
				starP, starI = p, i
				p++
				continue
			case '?':
				p++
				i++
				continue
			case '[':
				if n, ok := matchSet(pattern[p:], s[i]); n > 0 {
					if ok {
						p += n
						i++
						continue
					}
				} else if s[i] == '[' {
					p++
					i++
					continue
				}
			case '\\':
				if p+1 < len(pattern) {
					if pattern[p+1] == s[i] {
						p += 2
						i++
						continue
					}
					break
				}
				if s[i] == '\\' {
					p++
					i++
					continue
				}
			default:
				if c == s[i] {
					p++
					i++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		starI++
		p, i = starP+1, starI
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// matchSet matches b against the set at the start of pattern ("[...]")
// and returns the set's length in the pattern (0 when it has no closing
// bracket) and whether b is in it.
func matchSet(pattern string, b byte) (int, bool) {
	i := 1
	negate := i < len(pattern) && pattern[i] == '^'
	if negate {
		i++
	}
	found := false
	for first := true; i < len(pattern); first = false {
		c := pattern[i]
		if c == ']' && !first {
			return i + 1, found != negate
		}
		if c == '\\' && i+1 < len(pattern) {
			i++
			c = pattern[i]
		}
		if i+2 < len(pattern) && pattern[i+1] == '-' && pattern[i+2] != ']' {
			lo, hi := c, pattern[i+2]
			if lo > hi {
				lo, hi = hi, lo
			}
			if lo <= b && b <= hi {
				found = true
			}
			i += 3
			continue
		}
		if c == b {
			found = true
		}
		i++
	}
	return 0, false
}
