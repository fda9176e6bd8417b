package reconciler

import (
	"slices"
	"testing"
)

// A backend keeps one view per frontend through sets and drops in any
// order, whether the view is the one kept inline or not.
func TestBackendViewsKeepEveryFrontendsView(t *testing.T) {
	var (
		o  ops
		be = backendState{id: 1}
	)
	view := func(id, cluster uint32) backendView {
		return backendView{frontend: id, beValue: beValue{clusterID: cluster}}
	}
	frontends := func() (ids, clusters []uint32) {
		for v := range o.views(&be) {
			ids, clusters = append(ids, v.frontend), append(clusters, v.clusterID)
		}
		return
	}
	check := func(step string, wantIDs, wantClusters []uint32) {
		t.Helper()
		if ids, clusters := frontends(); !slices.Equal(ids, wantIDs) || !slices.Equal(clusters, wantClusters) {
			t.Fatalf("%s: views %v %v, want %v %v", step, ids, clusters, wantIDs, wantClusters)
		}
	}
	check("empty", nil, nil)
	o.setView(&be, view(7, 1))
	o.setView(&be, view(3, 2))
	o.setView(&be, view(9, 3))
	o.setView(&be, view(3, 22)) // replaces
	check("three", []uint32{7, 3, 9}, []uint32{1, 22, 3})
	o.dropView(&be, 7) // the inline one: the next takes its place
	check("first dropped", []uint32{3, 9}, []uint32{22, 3})
	o.dropView(&be, 42) // not there
	o.dropView(&be, 9)
	check("last dropped", []uint32{3}, []uint32{22})
	o.dropView(&be, 3)
	check("all dropped", nil, nil)
	if be.manyViews || len(o.moreViews) > 0 || be.first.frontend != 0 {
		t.Fatalf("an empty backend keeps %v / %d", o.moreViews, be.first.frontend)
	}
	o.setView(&be, view(5, 4))
	check("again", []uint32{5}, []uint32{4})
}
