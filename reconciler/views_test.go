package reconciler

import (
	"slices"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

// A backend keeps one view per frontend through sets and drops in any
// order, whether the view is the one kept inline or not.
func TestBackendViewsKeepEveryFrontendsView(t *testing.T) {
	var be backendState
	ref := func(zone string) lb.BackendRef { return lb.BackendRef{Zone: zone} }
	frontends := func() (ids []uint32, zones []string) {
		for v := range be.views() {
			ids, zones = append(ids, v.frontend), append(zones, v.ref.Zone)
		}
		return
	}
	check := func(step string, wantIDs []uint32, wantZones []string) {
		t.Helper()
		if ids, zones := frontends(); !slices.Equal(ids, wantIDs) || !slices.Equal(zones, wantZones) {
			t.Fatalf("%s: views %v %v, want %v %v", step, ids, zones, wantIDs, wantZones)
		}
	}
	check("empty", nil, nil)
	be.setView(7, ref("a"))
	be.setView(3, ref("b"))
	be.setView(9, ref("c"))
	be.setView(3, ref("b2")) // replaces
	check("three", []uint32{7, 3, 9}, []string{"a", "b2", "c"})
	be.dropView(7) // the inline one: the next takes its place
	check("first dropped", []uint32{3, 9}, []string{"b2", "c"})
	be.dropView(42) // not there
	be.dropView(9)
	check("last dropped", []uint32{3}, []string{"b2"})
	be.dropView(3)
	check("all dropped", nil, nil)
	if be.moreViews != nil || be.firstView != 0 {
		t.Fatalf("an empty backend keeps %v / %d", be.moreViews, be.firstView)
	}
	be.setView(5, ref("d"))
	check("again", []uint32{5}, []string{"d"})
}
