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

// views yields every frontend's view of the backend.
func (be *backendState) views() iter.Seq[backendView] {
	return func(yield func(backendView) bool) {
		if be.firstView != 0 && !yield(backendView{be.firstView, be.firstRef}) {
			return
		}
		for _, v := range be.moreViews {
			if !yield(v) {
				return
			}
		}
	}
}

// setView records frontend id's view of the backend.
func (be *backendState) setView(id uint32, ref lb.BackendRef) {
	switch {
	case be.firstView == id:
		be.firstRef = ref
		return
	case be.firstView == 0:
		be.firstView, be.firstRef = id, ref
		return
	}
	for i := range be.moreViews {
		if be.moreViews[i].frontend == id {
			be.moreViews[i].ref = ref
			return
		}
	}
	be.moreViews = append(be.moreViews, backendView{id, ref})
}

// dropView forgets frontend id's view of the backend.
func (be *backendState) dropView(id uint32) {
	if be.firstView != id {
		if be.moreViews = slices.DeleteFunc(be.moreViews, func(v backendView) bool { return v.frontend == id }); len(be.moreViews) == 0 {
			be.moreViews = nil
		}
		return
	}
	be.firstView, be.firstRef = 0, lb.BackendRef{}
	if len(be.moreViews) > 0 {
		be.firstView, be.firstRef = be.moreViews[0].frontend, be.moreViews[0].ref
		if be.moreViews = be.moreViews[1:]; len(be.moreViews) == 0 {
			be.moreViews = nil
		}
	}
}
