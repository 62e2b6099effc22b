package pebble

// ordered is an element of a minHeap: before reports whether the receiver
// comes out of the heap first.
type ordered[T any] interface {
	before(T) bool
}

// minHeap is a binary heap of small values kept in one slice, so that a
// million entries cost a million times the entry size and no pointers.
type minHeap[T ordered[T]] struct {
	items []T
}

func (h *minHeap[T]) len() int { return len(h.items) }

// peek returns the first element; the heap must not be empty.
func (h *minHeap[T]) peek() T { return h.items[0] }

func (h *minHeap[T]) push(x T) {
	h.items = append(h.items, x)
	h.up(len(h.items) - 1)
}

// pop removes and returns the first element; the heap must not be empty.
func (h *minHeap[T]) pop() T {
	n := len(h.items) - 1
	top := h.items[0]
	h.items[0] = h.items[n]
	var zero T
	h.items[n] = zero
	h.items = h.items[:n]
	if n > 0 {
		h.down(0)
	}
	h.shrink()
	return top
}

// shrink gives memory back once the heap holds less than a quarter of its
// capacity (after a large drain or a filter), to twice its length.
func (h *minHeap[T]) shrink() {
	if c := cap(h.items); c > 1024 && len(h.items) < c/4 {
		h.items = append(make([]T, 0, max(2*len(h.items), 1024)), h.items...)
	}
}

func (h *minHeap[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.items[i].before(h.items[p]) {
			return
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

func (h *minHeap[T]) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.items[r].before(h.items[l]) {
			m = r
		}
		if !h.items[m].before(h.items[i]) {
			return
		}
		h.items[i], h.items[m] = h.items[m], h.items[i]
		i = m
	}
}

// removeAt removes the element at index i.
func (h *minHeap[T]) removeAt(i int) {
	n := len(h.items) - 1
	if i != n {
		h.items[i] = h.items[n]
	}
	var zero T
	h.items[n] = zero
	h.items = h.items[:n]
	if i < n {
		h.down(i)
		h.up(i)
	}
}

// filter keeps the elements for which keep is true and restores the heap
// order.
func (h *minHeap[T]) filter(keep func(T) bool) {
	out := h.items[:0]
	for _, x := range h.items {
		if keep(x) {
			out = append(out, x)
		}
	}
	var zero T
	for i := len(out); i < len(h.items); i++ {
		h.items[i] = zero
	}
	h.items = out
	for i := len(out)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}
