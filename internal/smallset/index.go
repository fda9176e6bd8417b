package smallset

// Index finds elements of a slice by key: by searching the slice while it
// holds at most Max elements, through a map beyond, which it builds when
// first needed and extends as the slice grows. It spares the many callers
// with a few elements the cost of a map, and the few with many the cost of
// a search.
//
// The caller keeps the slice and passes it to every call. It may append to
// it and change its elements, but not change an element's key nor remove
// one: the map would not know.
type Index[E any, K comparable] struct {
	key func(*E) K
	m   map[K]int
	n   int // elements of the slice in m
}

// NewIndex returns an Index of slices whose elements have keys key(&e).
func NewIndex[E any, K comparable](key func(*E) K) Index[E, K] {
	return Index[E, K]{key: key}
}

// Find returns the position in elems of an element with key k, or -1 when
// there is none. (When several elements have key k, which one it finds
// may change as the slice grows.)
func (x *Index[E, K]) Find(elems []E, k K) int {
	if x.m == nil && len(elems) <= Max {
		return searchFunc(elems, k, x.key)
	}
	return x.inMap(elems, k)
}

// Has reports whether an element of elems has key k.
func (x *Index[E, K]) Has(elems []E, k K) bool { return x.Find(elems, k) >= 0 }

// inMap is Find through the map, which it first brings up to date with
// the elements appended since the last call.
func (x *Index[E, K]) inMap(elems []E, k K) int {
	if x.m == nil {
		x.m = make(map[K]int, len(elems))
	}
	for ; x.n < len(elems); x.n++ {
		x.m[x.key(&elems[x.n])] = x.n
	}
	if i, ok := x.m[k]; ok {
		return i
	}
	return -1
}

// searchFunc returns the position of the first element of elems with key
// k, or -1.
func searchFunc[E any, K comparable](elems []E, k K, key func(*E) K) int {
	for i := range elems {
		if key(&elems[i]) == k {
			return i
		}
	}
	return -1
}
