package reconciler

import (
	"slices"

	"github.com/lbstate/lbstate/lb"
)

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
