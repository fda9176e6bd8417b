package reconciler

import (
	"iter"
	"slices"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// This file is where a backend's lb_backends value comes from: each
// frontend's view of the backend, and the one value the views make
// (bpf/doc.go's checklist for adding a field points here).

// beValue is what an lb_backends value holds beside the backend's
// address (and its ID): what the reconciler keeps of what it wrote.
type beValue struct {
	clusterID uint32
	state     lb.BackendState
	zone      uint8 // the zone's ID (Config.LBZoneIDs)
}

// backendView is how one frontend (by ID) sees a backend: the value it
// would give the backend's lb_backends entry.
type backendView struct {
	frontend uint32
	beValue
}

// viewOf returns frontend id's view of the backend ref.
func (o *ops) viewOf(id uint32, ref lb.BackendRef) backendView {
	v := backendView{frontend: id, beValue: beValue{clusterID: ref.ClusterID, state: ref.State}}
	if ref.Zone != 0 {
		v.zone = o.cfg.zoneIDs[ref.Zone]
	}
	return v
}

// backendValue is the lb_backends value of a backend (beside its
// address): the most available state any frontend sees it in, and the
// cluster and zone as the frontend with the lowest ID sees them, so that
// it does not depend on which frontend was reconciled last.
func (o *ops) backendValue(be *backendState) beValue {
	var first backendView
	for v := range o.views(be) {
		// States are numbered from the most available; starting from the
		// first view, not from a fixed "least available" state, keeps a
		// state numbered after it (not-ready) from being read as that one.
		if first.frontend == 0 {
			first = v
			continue
		}
		state := min(first.state, v.state)
		if v.frontend < first.frontend {
			first = v
		}
		first.state = state
	}
	return first.beValue
}

// valueOf returns what v holds beside the address (a restored entry).
func valueOf(v bpf.Backend) beValue {
	return beValue{clusterID: v.ClusterID, state: lb.BackendState(v.State), zone: v.Zone}
}

// entry returns the backend's lb_backends value holding v, straight from
// the key's bytes (the key holds an address as bpf.BackendOf takes it).
func (be *backendState) entry(v beValue) bpf.Backend {
	return bpf.BackendOf(be.key.addr, be.key.port, be.key.proto, v.state, v.clusterID, v.zone)
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
