package pebble

// maxCachedNames bounds a nameCache: once it holds as many, it starts
// afresh, so names no longer in use (a worker's id, after its restart)
// do not keep it full.
const maxCachedNames = 1024

// nameCache keeps one copy of the strings that many job records share
// (types, queues, worker ids), so that decoding a record takes them from
// here instead of allocating each anew. It is not safe for concurrent
// use; the store's is used under mu. Its zero value is ready.
type nameCache struct {
	m map[string]string
}

// get returns b as a string, from the cache when it holds it.
func (c *nameCache) get(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if s, ok := c.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if c.m == nil {
		c.m = make(map[string]string)
	} else if len(c.m) >= maxCachedNames {
		clear(c.m)
	}
	c.m[s] = s
	return s
}
