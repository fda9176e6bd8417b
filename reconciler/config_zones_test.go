package reconciler

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

// A zone the configuration gives an ID (--lb-zone-ids) keeps it after
// sources have filled the process's table of zone names (65,535), as
// when an earlier hive of the process met a source naming a zone per
// backend: the zone's backends get its ID. (The table once gave a
// configured zone, as any new name past the bound, the zero Zone, and
// its backends lost their zone ID without a word.)
func TestConfiguredZoneKeepsItsIDAfterSourcesFillTheZoneTable(t *testing.T) {
	if os.Getenv("LBSTATE_FILL_ZONE_TABLE") != "1" {
		// The table is the process's: fill it in a process of its own.
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), "LBSTATE_FILL_ZONE_TABLE=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	for i := range 1 << 16 {
		lb.ZoneOf(fmt.Sprintf("source-zone-%d", i))
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
