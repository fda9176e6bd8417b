package reconciler

import (
	"iter"
	"slices"

	"github.com/lbstate/lbstate/lb"
)

// backendView is how one frontend (by ID) sees a backend: what of its
// BackendRef goes into the backend's lb_backends value.
type backendView struct {
	frontend  uint32
	clusterID uint32
	state     lb.BackendState
	zone      uint8 // the zone's ID (Config.LBZoneIDs)
}

// viewOf returns frontend id's view of the backend ref.
func (o *ops) viewOf(id uint32, ref lb.BackendRef) backendView {
	v := backendView{frontend: id, clusterID: ref.ClusterID, state: ref.State}
	if ref.Zone != "" {
		v.zone = o.cfg.zoneIDs[ref.Zone]
	}
	return v
}

// views yields every frontend's view of the backend.
func (o *ops) views(be *backendState) iter.Seq[backendView] {
	return func(yield func(backendView) bool) {
		if be.first.frontend != 0 && !yield(be.first) {
			return
		}
		if !be.manyViews {
			return
		}
		for _, v := range o.moreViews[be.id] {
			if !yield(v) {
				return
			}
		}
	}
}

// setView records a frontend's view of the backend (v.frontend says
// which).
func (o *ops) setView(be *backendState, v backendView) {
	switch be.first.frontend {
	case v.frontend, 0:
		be.first = v
		return
	}
	if o.moreViews == nil {
		o.moreViews = map[uint32][]backendView{}
	}
	more := o.moreViews[be.id]
	for i := range more {
		if more[i].frontend == v.frontend {
			more[i] = v
			return
		}
	}
	o.moreViews[be.id], be.manyViews = append(more, v), true
}

// dropView forgets frontend id's view of the backend.
func (o *ops) dropView(be *backendState, id uint32) {
	if be.first.frontend == id {
		be.first = backendView{}
		if !be.manyViews {
			return
		}
		be.first = o.moreViews[be.id][0]
		id = be.first.frontend // to drop from moreViews
	}
	if !be.manyViews {
		return
	}
	if more := slices.DeleteFunc(o.moreViews[be.id], func(v backendView) bool { return v.frontend == id }); len(more) > 0 {
		o.moreViews[be.id] = more
	} else {
		delete(o.moreViews, be.id)
		be.manyViews = false
	}
}
