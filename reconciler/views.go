package reconciler

import (
	"iter"
	"slices"

	"github.com/lbstate/lbstate/lb"
)

// backendView is how one frontend (by ID) sees a backend.
type backendView struct {
	frontend uint32
	ref      lb.BackendRef
}

// backendViews are the frontends' views of one backend. The first is kept
// inline: most backends serve one frontend, and then the views cost no
// allocation of their own. Frontend IDs start at 1, so a first view of
// frontend 0 is no view.
type backendViews struct {
	first backendView
	more  []backendView
}

// all yields every view.
func (vs *backendViews) all() iter.Seq[backendView] {
	return func(yield func(backendView) bool) {
		if vs.first.frontend != 0 && !yield(vs.first) {
			return
		}
		for _, v := range vs.more {
			if !yield(v) {
				return
			}
		}
	}
}

// setView records frontend id's view of the backend.
func (be *backendState) setView(id uint32, ref lb.BackendRef) {
	vs := &be.views
	switch {
	case vs.first.frontend == id:
		vs.first.ref = ref
		return
	case vs.first.frontend == 0:
		vs.first = backendView{id, ref}
		return
	}
	for i := range vs.more {
		if vs.more[i].frontend == id {
			vs.more[i].ref = ref
			return
		}
	}
	vs.more = append(vs.more, backendView{id, ref})
}

// dropView forgets frontend id's view of the backend.
func (be *backendState) dropView(id uint32) {
	vs := &be.views
	if vs.first.frontend == id {
		vs.first = backendView{}
		if len(vs.more) > 0 {
			vs.first, vs.more = vs.more[0], vs.more[1:]
			if len(vs.more) == 0 {
				vs.more = nil
			}
		}
		return
	}
	vs.more = slices.DeleteFunc(vs.more, func(v backendView) bool { return v.frontend == id })
}
