package reconciler

import (
	"maps"
	"slices"

	"github.com/lbstate/lbstate/lb"
)

// smallSetMax is the most elements a smallSet keeps in a slice.
const smallSetMax = 32

// smallSet is a set kept in a slice while it is small and in a map beyond:
// most frontends have a few backends and no source ranges, and a map costs
// hundreds of bytes even for one element.
type smallSet[K comparable] struct {
	list []K
	m    map[K]struct{}
}

func (s *smallSet[K]) has(k K) bool {
	if s.m != nil {
		_, ok := s.m[k]
		return ok
	}
	return slices.Contains(s.list, k)
}

// add adds k and reports whether it was not there yet.
func (s *smallSet[K]) add(k K) bool {
	switch {
	case s.has(k):
		return false
	case s.m != nil:
		s.m[k] = struct{}{}
	case len(s.list) < smallSetMax:
		s.list = append(s.list, k)
	default:
		s.m = make(map[K]struct{}, 2*smallSetMax)
		for _, x := range s.list {
			s.m[x] = struct{}{}
		}
		s.m[k] = struct{}{}
		s.list = nil
	}
	return true
}

func (s *smallSet[K]) remove(k K) {
	if s.m != nil {
		delete(s.m, k)
	} else if i := slices.Index(s.list, k); i >= 0 {
		s.list = slices.Delete(s.list, i, i+1)
	}
}

func (s *smallSet[K]) len() int {
	if s.m != nil {
		return len(s.m)
	}
	return len(s.list)
}

// items returns the elements: the set's own slice while it is small (do
// not change it), a new one beyond.
func (s *smallSet[K]) items() []K {
	if s.m != nil {
		return slices.Collect(maps.Keys(s.m))
	}
	return s.list
}

// backendView is how one frontend (by ID) sees a backend.
type backendView struct {
	frontend uint32
	ref      lb.BackendRef
}

// setView records frontend id's view of the backend.
func (be *backendState) setView(id uint32, ref lb.BackendRef) {
	for i := range be.views {
		if be.views[i].frontend == id {
			be.views[i].ref = ref
			return
		}
	}
	be.views = append(be.views, backendView{id, ref})
}

// dropView forgets frontend id's view of the backend.
func (be *backendState) dropView(id uint32) {
	be.views = slices.DeleteFunc(be.views, func(v backendView) bool { return v.frontend == id })
}
