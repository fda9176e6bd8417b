package reconciler

import (
	"testing"

	"github.com/lbstate/lbstate/internal/zonetest"
	"github.com/lbstate/lbstate/lb"
)

// A zone the configuration gives an ID (--lb-zone-ids) keeps it after
// sources have filled the process's table of zone names (65,535), as
// when an earlier hive of the process met a source naming a zone per
// backend: the zone's backends get its ID. (The table once gave a
// configured zone, as any new name past the bound, the zero Zone, and
// its backends lost their zone ID without a word.)
func TestConfiguredZoneKeepsItsIDAfterSourcesFillTheZoneTable(t *testing.T) {
	if !zonetest.Full(t) {
		return
	}
	s, err := Config{LBAlgorithm: "random", LBMaxWeightedSlots: 1, LBZoneIDs: map[string]string{"zone-a": "7"}}.settings()
	if err != nil {
		t.Fatal(err)
	}
	a := lb.ZoneOf("zone-a")
	if a == 0 || a.String() != "zone-a" {
		t.Fatalf("configured zone-a has handle %d (%q)", a, a.String())
	}
	o := &ops{cfg: s}
	if v := o.viewOf(1, lb.BackendRef{Address: lb.MustParseL3n4Addr("10.0.0.1:80/TCP"), Zone: a}); v.zone != 7 {
		t.Fatalf("a backend in zone-a gets zone ID %d, want 7", v.zone)
	}
}
