// Package sparse holds Array, a fixed-length array whose memory is
// allocated in pages as elements are set, and given back as pages empty.
// The Go-side mirrors of the dense ID maps (lb_backends, lb_rev_nat) have
// one element per slot of a kernel array sized for 100,000 services, but
// most agents use a few of those slots: a fresh agent should not hold
// tens of megabytes of zeros.
//
// An Array is not safe for concurrent use.
package sparse

// pageLen is the number of elements in a page: the page table of a
// million elements is 8 KiB, and a page of 36-byte elements 36 KiB.
const pageLen = 1024

// Array is an array of n elements of T, each the zero T until Set. The
// zero value has no elements; New makes one of n.
type Array[T any] struct {
	pages []*page[T]
	set   int
	// spare is the last page given back, kept for the next page needed:
	// IDs are handed out in increasing order, so as one page empties at
	// the old end of the live IDs another fills at the new end, and
	// churn would otherwise allocate a page every pageLen IDs.
	spare *page[T]
}

// page holds pageLen elements and which of them are set.
type page[T any] struct {
	vals [pageLen]T
	set  [pageLen / 64]uint64
	n    int
}

// New returns an Array of n elements, none set.
func New[T any](n uint32) *Array[T] {
	return &Array[T]{pages: make([]*page[T], (uint64(n)+pageLen-1)/pageLen)}
}

// Get returns element i: the value last Set, or the zero T if it was
// never set or was Cleared since.
func (a *Array[T]) Get(i uint32) T {
	if p := a.pages[i/pageLen]; p != nil {
		return p.vals[i%pageLen]
	}
	var zero T
	return zero
}

// IsSet reports whether element i was Set and not Cleared since.
func (a *Array[T]) IsSet(i uint32) bool {
	p := a.pages[i/pageLen]
	return p != nil && p.set[i%pageLen/64]&(1<<(i%64)) != 0
}

// Set sets element i to v, allocating its page if need be.
func (a *Array[T]) Set(i uint32, v T) {
	p := a.pages[i/pageLen]
	if p == nil {
		if p, a.spare = a.spare, nil; p == nil {
			p = new(page[T])
		}
		a.pages[i/pageLen] = p
	}
	p.vals[i%pageLen] = v
	if w, bit := &p.set[i%pageLen/64], uint64(1)<<(i%64); *w&bit == 0 {
		*w |= bit
		p.n++
		a.set++
	}
}

// Clear makes element i the zero T again; a page none of whose elements
// is set any more is given back.
func (a *Array[T]) Clear(i uint32) {
	p := a.pages[i/pageLen]
	if p == nil {
		return
	}
	w, bit := &p.set[i%pageLen/64], uint64(1)<<(i%64)
	if *w&bit == 0 {
		return
	}
	*w &^= bit
	var zero T
	p.vals[i%pageLen] = zero
	a.set--
	if p.n--; p.n == 0 { // every element is zero again, as in a new page
		a.pages[i/pageLen] = nil
		a.spare = p
	}
}

// Len returns the number of elements set.
func (a *Array[T]) Len() int { return a.set }
