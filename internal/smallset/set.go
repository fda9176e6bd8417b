// Package smallset keeps sets, and indexes of slices, as plain slices
// while they are small and as Go maps beyond. Most of lbstate's lookups (a
// frontend's backends, a service's endpoints, the addresses a call keeps)
// involve a handful of keys, where a linear search is faster than hashing
// and a slice costs a fraction of a map's memory; a few involve thousands,
// where only a map will do.
//
// Neither Set nor Index is safe for concurrent use.
package smallset

import (
	"maps"
	"slices"
)

// Max is the most keys searched linearly. Up to about this many, a search
// of keys the size of an lb.L3n4Addr is no slower than a map lookup, and
// a slice is far cheaper to build (BenchmarkLookup, BenchmarkIndex).
const Max = 32

// Set is a set of K, kept in a slice while it holds at most Max elements
// and in a Go map once it has grown past that (it does not go back when
// it shrinks). The zero value is an empty set.
type Set[K comparable] struct {
	list []K
	m    map[K]struct{}
}

// Has reports whether k is in the set.
func (s *Set[K]) Has(k K) bool {
	if s.m != nil {
		return s.inMap(k)
	}
	return search(s.list, k) >= 0
}

// Add adds k and reports whether it was not in the set yet.
func (s *Set[K]) Add(k K) bool {
	switch {
	case s.Has(k):
		return false
	case s.m != nil:
		s.m[k] = struct{}{}
	case len(s.list) < Max:
		s.list = append(s.list, k)
	default:
		s.m = make(map[K]struct{}, 2*Max)
		for _, x := range s.list {
			s.m[x] = struct{}{}
		}
		s.m[k] = struct{}{}
		s.list = nil
	}
	return true
}

// Grow makes room for n more elements while the set is small, so that
// adding them allocates at most once.
func (s *Set[K]) Grow(n int) {
	// Not slices.Grow: under -race its temporary slice is a second
	// allocation.
	if s.m == nil && n > 0 && len(s.list)+n <= Max && cap(s.list)-len(s.list) < n {
		l := make([]K, len(s.list), len(s.list)+n)
		copy(l, s.list)
		s.list = l
	}
}

// Remove removes k, if it is there.
func (s *Set[K]) Remove(k K) {
	if s.m != nil {
		delete(s.m, k)
	} else if i := search(s.list, k); i >= 0 {
		s.list = slices.Delete(s.list, i, i+1)
	}
}

// Len returns the number of elements.
func (s *Set[K]) Len() int {
	if s.m != nil {
		return len(s.m)
	}
	return len(s.list)
}

// Items returns the elements: while the set is small, its own slice, in
// the order they were added (do not change it, nor keep it across a change
// of the set); beyond, a new slice in no particular order.
func (s *Set[K]) Items() []K {
	if s.m != nil {
		return slices.Collect(maps.Keys(s.m))
	}
	return s.list
}

// inMap is Has for a set that has become a map. (See search for why it is
// out of line.)
//
//go:noinline
func (s *Set[K]) inMap(k K) bool {
	_, ok := s.m[k]
	return ok
}

// search returns the position of k in list, or -1.
//
// It is kept out of line: inlined into a caller, generic code compares
// keys at half the speed it does in a frame of its own (BenchmarkLookup),
// which costs more than the call.
//
//go:noinline
func search[K comparable](list []K, k K) int {
	for i := range list {
		if list[i] == k {
			return i
		}
	}
	return -1
}
